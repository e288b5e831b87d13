"""Protobuf values in the Confluent wire format, written by confluent-kafka's own ProtobufSerializer from classes
protoc generated, under two versions of one .proto (real Kafka, registry, Spark, Postgres). Each version is produced
in a process of its own (`helpers.protobuf_corpus`)."""

from datetime import datetime, timezone

from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from psycopg2 import sql

from helpers.pipeline_env import REGISTRY_TIMEOUT
from helpers.protobuf_corpus import serialized

V1 = """syntax = "proto3";
package microingest.test;
import "google/protobuf/timestamp.proto";
message Event {
  string event_id = 1;
  float amount = 2;
  google.protobuf.Timestamp event_time = 3;
}
"""
# v2: fields added (one with presence, an enum, one the declaration does not name) and a nested message
V2 = V1.replace(
    "}\n",
    """  optional string user_id = 4;
  Kind event_type = 5;
  int64 session = 6;
  enum Kind { CLICK = 0; PURCHASE = 1; }
}
""",
    1,
)
# v3 as a Java producer registers it: .proto text, importing a file registered as a schema of its own
MONEY = """syntax = "proto3";
package microingest.test.common;
message Money { string currency = 1; int64 cents = 2; }
"""
V3 = V1.replace(
    'import "google/protobuf/timestamp.proto";',
    'import "google/protobuf/timestamp.proto";\nimport "common/money.proto";',
).replace("}\n", "  microingest.test.common.Money price = 4;\n}\n", 1)
AT = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def test_two_proto_versions_land_in_the_same_columns_once_each(env, registry, tmp_path):
    env.redeclare(value_format="protobuf", dead_letter={"max_fraction": None})
    topic, at = env.topic, AT.isoformat().replace("+00:00", "Z")
    old = serialized(
        tmp_path / "v1",
        V1,
        registry,
        topic,
        [{"event_id": f"v1-{i}", "amount": i * 0.5, "event_time": at} for i in range(30)],
    )
    new = serialized(
        tmp_path / "v2",
        V2,
        registry,
        topic,
        [
            {
                "event_id": f"v2-{i}",
                "amount": i * 0.25,
                "event_time": at,
                "event_type": i % 2,
                "session": i,
                **({"user_id": f"u{i}"} if i % 3 else {}),
            }
            for i in range(30)
        ],
    )
    assert old[0][1:5] != new[0][1:5], "two writer schemas, two ids"
    # cut inside its last fields (event_type 1, session 1: two bytes each), the message ends on a lone field tag
    positions = env.send([(None, v) for v in old + new] + [(b"cut", new[1][:-3]), (b"json", b'{"event_id": 1}')])
    env.ingest_all()
    rows = env.query(
        sql.SQL("SELECT event_id, user_id, event_type, amount, event_time FROM {} ORDER BY event_id").format(env.table)
    )
    # proto3 scalars without presence read as their defaults; v1 has no user_id or event_type at all
    expected = sorted(
        [(f"v1-{i}", None, None, i * 0.5, AT) for i in range(30)]
        + [(f"v2-{i}", f"u{i}" if i % 3 else None, ("CLICK", "PURCHASE")[i % 2], i * 0.25, AT) for i in range(30)]
    )
    assert rows == expected
    assert len(env.landed_once()) == len(positions) - 2
    dead = {bytes(key).decode(): error_class for _, _, error_class, _, key, _, _ in env.dead_letters()}
    assert dead == {"cut": "undecodable", "json": "not_framed"}


def test_a_schema_registered_as_proto_text_with_a_reference_is_compiled_and_read(env, registry, tmp_path):
    env.redeclare(value_format="protobuf")
    topic, at = env.topic, AT.isoformat().replace("+00:00", "Z")
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    money_subject = f"{topic}-common-money"
    client.register_schema(money_subject, Schema(MONEY, "PROTOBUF"))
    reference = SchemaReference("common/money.proto", money_subject, client.get_latest_version(money_subject).version)
    client.register_schema(f"{topic}-value", Schema(V3, "PROTOBUF", [reference]))
    text_id = client.get_latest_version(f"{topic}-value").schema_id
    # confluent-kafka's serializer frames the messages (registering its own serialized copy under a scratch topic's
    # subject: asked for the text one, Apicurio gives no descriptor it reads); the frame then names the text's id, as
    # a Java producer's would
    values = serialized(
        tmp_path,
        V3,
        registry,
        f"{topic}-scratch",
        [{"event_id": f"t{i}", "amount": i * 0.5, "event_time": at} for i in range(20)],
        imports={"common/money.proto": MONEY},
    )
    values = [v[:1] + text_id.to_bytes(4, "big") + v[5:] for v in values]
    registered = client.get_schema(text_id)
    assert registered.schema_str.startswith("syntax") and [r.name for r in registered.references] == [
        "common/money.proto"
    ]
    positions = env.send([(None, v) for v in values])
    env.ingest_all()
    rows = env.query(sql.SQL("SELECT event_id, amount, event_time FROM {} ORDER BY event_id").format(env.table))
    assert rows == sorted((f"t{i}", i * 0.5, AT) for i in range(20))
    assert len(env.landed_once()) == len(positions) and env.dead_letters() == []


def test_a_run_through_airflow_lands_both_proto_versions_and_names_its_dead_letter(api, served, registry, tmp_path):
    env = served["protobuf"]
    topic, at = env.topic, AT.isoformat().replace("+00:00", "Z")
    old = serialized(
        tmp_path / "v1",
        V1,
        registry,
        topic,
        [{"event_id": f"p1-{i}", "amount": 1.5, "event_time": at} for i in range(300)],
    )
    new = serialized(
        tmp_path / "v2",
        V2,
        registry,
        topic,
        [
            {"event_id": f"p2-{i}", "amount": 0.5, "event_time": at, "event_type": 1, "session": i, "user_id": "u"}
            for i in range(300)
        ],
    )
    positions = env.send([(None, v) for v in old + new] + [(b"json", b'{"event_id": 1}')])
    run_id = api.trigger(env.pipeline.dag_id, {})
    run = api.wait_for_run(env.pipeline.dag_id, run_id, timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})
    assert env.query(
        "SELECT DISTINCT change, changed_by FROM microingest.schema_changes WHERE pipeline = %s", (env.pipeline.name,)
    ) == [("created", f"DAG {env.pipeline.dag_id} run {run_id}")]
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(positions[:-1])
    assert env.query(
        sql.SQL("SELECT event_type, count(*), sum(amount), count(user_id) FROM {} GROUP BY 1 ORDER BY 1").format(
            env.table
        )
    ) == [("PURCHASE", 300, 150.0, 300), (None, 300, 450.0, 0)]
    assert [(bytes(key), error_class) for _, _, error_class, _, key, _, _ in env.dead_letters()] == [
        (b"json", "not_framed")
    ]
