"""Avro values in the Confluent wire format, written by confluent-kafka's own AvroSerializer against the real schema
registry under two schema versions, read by one pipeline into one table (real Kafka, registry, Spark, Postgres)."""

import json
import uuid
from datetime import datetime, timezone

import pytest
from confluent_kafka.serialization import MessageField
from psycopg2 import sql

from helpers.avro_corpus import serialize
from local_platform.faults.cluster import platform
from microingest.commit.target_tables import prepare_targets
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_live_run

V1 = {
    "type": "record",
    "name": "Event",
    "namespace": "microingest.test",
    "fields": [
        {"name": "event_id", "type": "string"},
        {"name": "amount", "type": "float"},  # promoted to the declared double
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}
# v2: a field added with a default (BACKWARD compatible), another given one; the extra field is not declared
V2 = {
    **V1,
    "fields": V1["fields"]
    + [
        {"name": "user_id", "type": ["null", "string"], "default": None},
        {"name": "event_type", "type": "string", "default": "click"},
        {"name": "session", "type": "long", "default": 0},
    ],
}
AT = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def avro_env(env):
    env.redeclare(value_format="avro")
    return env


def test_two_schema_versions_land_in_the_same_columns_once_each(avro_env, registry):
    env = avro_env
    topic = env.topic
    old = serialize(
        registry, topic, V1, [{"event_id": f"v1-{i}", "amount": i * 0.5, "event_time": AT} for i in range(40)]
    )
    new = serialize(
        registry,
        topic,
        V2,
        [
            {
                "event_id": f"v2-{i}",
                "amount": i * 0.25,
                "event_time": AT,
                "user_id": f"u{i}",
                "event_type": "purchase",
                "session": i,
            }
            for i in range(40)
        ],
    )
    assert old[0][:1] == b"\x00" and old[0][1:5] != new[0][1:5], "two writer schemas, two ids"
    positions = env.send(
        [(f"v1-{i}".encode(), v) for i, v in enumerate(old)] + [(f"v2-{i}".encode(), v) for i, v in enumerate(new)]
    )
    env.ingest_all()
    rows = env.query(
        sql.SQL("SELECT event_id, user_id, event_type, amount, event_time FROM {} ORDER BY event_id").format(env.table)
    )
    expected = sorted(
        [(f"v1-{i}", None, None, i * 0.5, AT) for i in range(40)]
        + [(f"v2-{i}", f"u{i}", "purchase", i * 0.25, AT) for i in range(40)]
    )
    assert rows == expected
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(positions) and env.dead_letters() == []


def test_values_that_are_not_avro_of_a_known_schema_are_dead_letters_with_their_reason(avro_env, registry):
    env = avro_env
    env.redeclare(dead_letter={"max_fraction": None})  # six of the seven are bad on purpose
    [good] = serialize(registry, env.topic, V1, [{"event_id": "ok", "amount": 1.0, "event_time": AT}])
    unknown_id = b"\x00" + (2**31 - 7).to_bytes(4, "big") + good[5:]
    # an array of nulls whose block count asks for 2^62 of them, in eight bytes
    noise = {"name": "noise", "type": {"type": "array", "items": "null"}, "default": []}  # a default: BACKWARD
    hostile_schema = {**V1, "fields": V1["fields"] + [noise]}
    [framed] = serialize(
        registry, env.topic, hostile_schema, [{"event_id": "h", "amount": 1.0, "event_time": AT, "noise": []}]
    )
    endless = framed[:-1] + bytes([0x80] * 9 + [0x01]) + b"\x00"  # the empty array's 0, now the zigzag varint of 2^62
    env.send(
        [
            (b"good", good),
            (b"json", b'{"event_id": "e"}'),
            (b"unknown", unknown_id),
            (b"truncated", good[:-3]),
            (b"trailing", good + b"\x00\x00"),
            (b"short", b"\x00\x00"),
            (b"endless", endless),
        ]
    )
    env.ingest_all()
    assert [event_id for _, _, event_id in env.target_rows()] == ["ok"]
    dead = {bytes(key).decode(): (error_class, message) for _, _, error_class, message, key, _, _ in env.dead_letters()}
    assert {k: v[0] for k, v in dead.items()} == {
        "json": "not_framed",
        "unknown": "unknown_schema",
        "truncated": "undecodable",
        "trailing": "undecodable",
        "short": "not_framed",
        "endless": "undecodable",
    }
    assert "has an array of items that take no bytes (at .noise)" in dead["endless"][1]
    assert f"schema id {2**31 - 7} is not in the registry" in dead["unknown"][1]
    assert "begins with 7b 22 65 76 65" in dead["json"][1]


def test_avro_keys_key_an_upsert_target_the_declaration_created(avro_env, registry):
    env = avro_env
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(sink_mode="upsert_latest", key_format="avro", dead_letter={"max_fraction": None})
    [prepared] = prepare_targets([env.pipeline], "test")
    assert prepared.created and prepared.summary().endswith("created with 12 columns")
    topic = env.topic
    key_schema = {
        "type": "record",
        "name": "Device",
        "namespace": "microingest.test",
        "fields": [{"name": "site", "type": "string"}, {"name": "id", "type": "int"}],
    }
    devices = [{"site": s, "id": i} for s in ("north", "south") for i in range(3)]
    keys = serialize(registry, topic, key_schema, devices, MessageField.KEY)
    # Each device sends three readings, under the older value schema then the newer; the newest one stays.
    readings = [
        (
            keys[d],
            serialize(
                registry, topic, V1 if n < 2 else V2, [{"event_id": f"{d}-{n}", "amount": float(n), "event_time": AT}]
            )[0],
        )
        for n in range(3)
        for d in range(6)
    ]
    positions = env.send(
        [(k, v) for k, v in readings[:9]] + [(b"plain", readings[0][1])] + [(k, v) for k, v in readings[9:]]
    )
    env.ingest_all()
    rows = env.query(sql.SQL("SELECT record_key, event_id, event_type FROM {} ORDER BY 1").format(env.table))
    assert rows == sorted(
        (json.dumps(device, sort_keys=True, separators=(",", ":")), f"{d}-2", "click")
        for d, device in enumerate(devices)
    )
    [(_, _, error_class, message, key, _, _)] = env.dead_letters()
    assert (error_class, bytes(key)) == ("not_framed", b"plain") and message.startswith("key is not in the Confluent")
    assert env.ledger() == {p: max(o for q, o in positions if q == p) + 1 for p, _ in positions}


@pytest.mark.disruptive
def test_a_registry_that_does_not_answer_fails_the_batch_and_the_retry_lands_everything(avro_env, registry):
    """Its own namespace makes the schema one no executor has fetched yet, so the stopped registry is asked."""
    env = avro_env
    schema = {**V2, "namespace": f"microingest.test.n{uuid.uuid4().hex}"}  # a name part starts with a letter
    values = serialize(
        registry,
        env.topic,
        schema,
        [{"event_id": f"e{i}", "amount": 1.5, "event_time": AT} for i in range(30)],
    )
    env.send([(None, v) for v in values])
    plan = plan_live_run(env.pipeline)
    platform("stop", "schema-registry")
    try:
        failed = env.spark_job(plan)
    finally:
        platform("start", "schema-registry")
    assert failed.returncode not in (0, REFUSED_EXIT), failed.stdout[-3000:]
    assert "SchemaRegistryUnavailableError" in failed.stdout, failed.stdout[-3000:]
    assert env.target_rows() == [] and env.ledger() == {} and env.dead_letters() == []
    env.ingest_all()
    assert sorted(event_id for _, _, event_id in env.landed_once()) == sorted(f"e{i}" for i in range(30))
    assert env.dead_letters() == []


def test_a_run_through_airflow_lands_both_schema_versions(api, served, registry):
    env = served["avro"]
    topic = env.topic
    values = serialize(
        registry, topic, V1, [{"event_id": f"a1-{i}", "amount": 2.0, "event_time": AT} for i in range(500)]
    )
    values += serialize(
        registry,
        topic,
        V2,
        [
            {"event_id": f"a2-{i}", "amount": 3.0, "event_time": AT, "user_id": "u", "event_type": "view", "session": 1}
            for i in range(500)
        ],
    )
    positions = env.send([(None, v) for v in values])
    run_id = api.trigger(env.pipeline.dag_id, {})
    run = api.wait_for_run(env.pipeline.dag_id, run_id, timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})
    # Its table was not made beforehand: the run's planning created it from the declaration, and said so.
    assert env.query(
        "SELECT DISTINCT change, changed_by FROM microingest.schema_changes WHERE pipeline = %s", (env.pipeline.name,)
    ) == [("created", f"DAG {env.pipeline.dag_id} run {run_id}")]
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(positions) and env.dead_letters() == []
    assert env.query(
        sql.SQL("SELECT event_type, count(*), sum(amount) FROM {} GROUP BY 1 ORDER BY 1").format(env.table)
    ) == [("view", 500, 1500.0), (None, 500, 1000.0)]
