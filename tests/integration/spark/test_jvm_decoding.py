"""JSON and Avro records decoded in Spark's JVM, through real jobs: the same rows and dead letters in Postgres as the
reference decoder stores for the same records (a second pipeline on the same topic, with MICROINGEST_JVM_DECODING=off);
and a batch whose sampled records the JVM got wrong is decoded again by the reference before anything is written."""

from __future__ import annotations

import base64
import json
import os
import random
import re
import shutil
import uuid
import zipfile
from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from psycopg2 import sql

from helpers.avro_corpus import framed, mutate, serialize
from helpers.avro_orders import AVRO_ORDER_SCHEMA, WRITERS, avro_order
from helpers.hostile_records import HOSTILE_KEYS, HOSTILE_VALUES
from helpers.json_corpus import base64_token, date_text, decimal_token, uuid_text
from helpers.json_corpus import mutate as mutate_json
from helpers.order_corpus import ORDER_SCHEMA, order_headers, order_value
from helpers.pipeline_env import REGISTRY_TIMEOUT, new_env
from microingest import settings
from microingest.commit.target_tables import prepare_targets
from microingest.plan.live import plan_live_run

COLUMNS = (
    "source_topic, source_partition, source_offset, kafka_timestamp, event_id, user_id, event_type, amount, event_time"
)


def records(n: int) -> list[tuple]:
    rng = random.Random(26)
    out = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.1:
            value = rng.choice(HOSTILE_VALUES).replace(b'"id"', b'"event_id"')
        else:
            value = json.dumps(
                {
                    "event_id": f"e{i}",
                    "user_id": rng.choice([None, "u\u00e9", "\U0001f600", "a\tb"]),
                    "event_type": rng.choice(["click", "view"]),
                    "amount": rng.choice([-0.0, 0.1, 1e-300, rng.uniform(-1e12, 1e12), 2**53 + 1]),
                    "event_time": rng.choice(
                        [1_700_000_000_000 + i, "2026-01-02T03:04:05.123456+01:00", -62_135_596_800_000]
                    ),
                }
            ).encode()
        out.append((rng.choice(HOSTILE_KEYS), value))
    return out


def text_typed_records(n: int) -> list[tuple]:
    """Orders' scalar types as producers write them (decimals as numbers or text, dates, UUIDs, base64 bytes), each
    now and then drawn from the differential tests' generators instead, odd or malformed; some records mutated."""
    rng = random.Random(28)
    out = []
    for i in range(n):
        price = str(Decimal(rng.randrange(-(10**9), 10**9)).scaleb(-2))
        usual = {
            "price": price if rng.random() < 0.5 else json.dumps(price),
            "rate": repr(round(rng.uniform(-99, 99), rng.randint(0, 8))),
            "day": json.dumps(f"20{rng.randint(0, 99):02d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"),
            "ref": json.dumps(str(uuid.UUID(int=rng.getrandbits(128)))),
            "blob": json.dumps(base64.b64encode(rng.randbytes(rng.randrange(16))).decode()),
        }
        odd = {
            "price": lambda: decimal_token(rng),
            "rate": lambda: decimal_token(rng),
            "day": lambda: json.dumps(date_text(rng)),
            "ref": lambda: json.dumps(uuid_text(rng)),
            "blob": lambda: base64_token(rng),
        }
        fields = [f'"event_id": "e{i}"']
        for name, token in usual.items():
            if rng.random() < 0.97:
                fields.append(f'"{name}": {odd[name]() if rng.random() < 0.08 else token}')
        value = ("{" + ", ".join(fields) + "}").encode()
        out.append((b"k", mutate_json(rng, value) if rng.random() < 0.03 else value))
    return out


TEXT_TYPED = {
    "event_id": {"type": "string", "required": True},
    "price": {"type": "decimal", "precision": 12, "scale": 2},
    "rate": {"type": "decimal", "precision": 6, "scale": 4, "rounding": "half_even"},
    "day": "date",
    "ref": "uuid",
    "blob": "bytes",
}
TEXT_TYPED_COLUMNS = (
    "source_topic, source_partition, source_offset, kafka_timestamp, event_id, price, rate, day, ref, blob"
)


def stored(env, columns: str = COLUMNS) -> tuple[list, list]:
    rows = env.query(sql.SQL("SELECT " + columns + " FROM {} ORDER BY 2, 3").format(env.table))
    dead = env.query(
        'SELECT topic, partition, "offset", error_class, error_message, record_key, record_value '
        "FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 2, 3",
        (env.pipeline.name,),
    )
    return rows, [(*d[:5], *(None if v is None else bytes(v) for v in d[5:])) for d in dead]


# Two versions of the writer schema under the topic's subject; v2 adds fields, one declared, one not.
EVENT_V1 = {
    "type": "record",
    "name": "Event",
    "namespace": "microingest.jvm",
    "fields": [
        {"name": "event_id", "type": "string"},
        {"name": "amount", "type": ["null", "double"]},
        {"name": "event_time", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
EVENT_V2 = {
    **EVENT_V1,
    "fields": EVENT_V1["fields"]
    + [
        {"name": "user_id", "type": ["null", "string"], "default": None},
        {"name": "seen", "type": {"type": "map", "values": "float"}, "default": {}},
    ],
}


def avro_records(registry: dict, topic: str, n: int) -> list[tuple]:
    rng = random.Random(27)
    data = [
        {
            "event_id": rng.choice(["nul\x00", f"\u00e9\U0001f600{i}"]) if rng.random() < 0.1 else f"e{i}",
            "amount": rng.choice([None, -0.0, 1e-300, float("nan"), float("-inf")])
            if rng.random() < 0.1
            else rng.uniform(-1e12, 1e12),
            "event_time": 1_700_000_000_000 + rng.randrange(-(10**12), 10**12),
            "tags": [f"t{j}" for j in range(rng.randrange(3))],
            "user_id": rng.choice([None, "u\u00e9", "a\tb"]),
            "seen": {"x": rng.uniform(-1, 1)},
        }
        for i in range(n)
    ]
    values = serialize(registry, topic, EVENT_V1, data[: n // 2]) + serialize(registry, topic, EVENT_V2, data[n // 2 :])
    out = []
    for value in values:
        sent = mutate(rng, value) if rng.random() < 0.1 else value
        out.append((rng.choice(HOSTILE_KEYS) if sent is not None else b"tombstone", sent))
    return out


@pytest.mark.quick
def test_the_jvm_path_stores_exactly_what_the_reference_path_stores(env, pg, kafka, monkeypatch):
    compare_with_reference(env, pg, kafka, monkeypatch, records(3000))


def test_avro_through_the_jvm_path_is_stored_exactly_as_the_reference_stores_it(env, pg, kafka, registry, monkeypatch):
    compare_with_reference(env, pg, kafka, monkeypatch, avro_records(registry, env.topic, 3000), value_format="avro")


def test_decimals_dates_uuids_and_bytes_through_the_jvm_path_are_stored_exactly_as_the_reference_stores_them(
    env, pg, kafka, monkeypatch
):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))  # the declaration's own, made as migrate makes it
    compare_with_reference(env, pg, kafka, monkeypatch, text_typed_records(3000), TEXT_TYPED_COLUMNS, schema=TEXT_TYPED)


ORDER_COLUMNS = "source_topic, source_partition, source_offset, kafka_timestamp, " + ", ".join(ORDER_SCHEMA)


def test_orders_through_the_jvm_path_are_stored_exactly_as_the_reference_stores_them(env, pg, kafka, monkeypatch):
    """Paths into a nested customer and into an array's elements, arrays of text, decimals and booleans, fields from
    the key and headers: the orders shape, mostly decoded in the JVM. The driver's bound for a batch's COPY data is
    set to 10 KiB, so both paths collect the batch in chunks and spool it to disk."""
    monkeypatch.setenv("MICROINGEST_BATCH_MEMORY_MB", "0.01")
    rng = random.Random(29)
    keys = [b"k", None, b"\xff", "\u00e9".encode()]
    # kafka-python sends no header without a value; the differential test has them (tests/unit/decode/test_jvm_json.py)
    sent = [
        (rng.choice(keys), order_value(rng), [(k, v) for k, v in order_headers(rng) if v is not None])
        for _ in range(5000)
    ]
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    compare_with_reference(env, pg, kafka, monkeypatch, sent, ORDER_COLUMNS, schema=ORDER_SCHEMA)


def test_avro_orders_through_the_jvm_path_are_stored_exactly_as_the_reference_stores_them(
    env, pg, kafka, registry, monkeypatch
):
    """Orders as Avro, under three writer schemas of the topic's subject (logical types, text, plain numbers):
    decimals, dates, UUIDs, bytes, nested records, arrays, the key and headers, mostly decoded in the JVM."""
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    subject = f"{env.topic}-value"
    client.set_compatibility(subject_name=subject, level="NONE")  # the three writers are not versions of one another
    ids = [client.register_schema(subject, Schema(json.dumps(w), "AVRO")) for w in WRITERS]
    rng = random.Random(30)
    sent = []
    for _ in range(5000):
        schema_id, writer = rng.choice(list(zip(ids, WRITERS, strict=True)))
        value = framed(schema_id, writer, avro_order(rng, writer))
        headers = [(k, v) for k, v in order_headers(rng) if v is not None]
        sent_value = mutate(rng, value) if rng.random() < 0.05 else value
        sent.append((rng.choice([b"k", b"\xff"] + [None] * (sent_value is not None)), sent_value, headers))
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    columns = "source_topic, source_partition, source_offset, kafka_timestamp, " + ", ".join(AVRO_ORDER_SCHEMA)
    compare_with_reference(env, pg, kafka, monkeypatch, sent, columns, schema=AVRO_ORDER_SCHEMA, value_format="avro")


def test_orders_through_a_statement_checks_and_masks_on_the_jvm_path_are_stored_as_the_reference_stores_them(
    env, pg, kafka, monkeypatch
):
    """Rows that pass through Spark SQL: the `batch` view made from the JVM decoder's columns for the records it
    takes, in every declared type, beside the reference's for those it declines; a check and a mask on them. Each
    record lands as the reference path lands it."""
    rng = random.Random(31)
    sent = [
        (rng.choice([b"k", None]), order_value(rng), [(k, v) for k, v in order_headers(rng) if v is not None])
        for _ in range(5000)
    ]
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    compare_with_reference(
        env,
        pg,
        kafka,
        monkeypatch,
        sent,
        ORDER_COLUMNS,
        schema=ORDER_SCHEMA,
        transform_sql="SELECT * FROM batch",
        checks=[{"sql": "total < 9500000", "on_fail": "dead_letter"}],
        mask={"customer_id": "sha256"},
    )


def decoded_in_jvm(env) -> int:
    [(batches, total)] = env.query(
        "SELECT count(*), sum(decoded_in_jvm) FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)
    )
    assert batches > 0
    return total


def compare_with_reference(env, pg, kafka, monkeypatch, sent: list[tuple], columns: str = COLUMNS, **declared) -> None:
    """The records ingested by `env`'s pipeline, mostly in the JVM, and by a twin on the same topic with the JVM path
    off: the same rows and dead letters."""
    env.redeclare(dead_letter={"max_fraction": 0.75}, **declared)
    if "schema" in declared:
        assert not [p for p in prepare_targets([env.pipeline], "test") if isinstance(p, Exception)]
    positions = env.send(sent)
    [jvm_run] = env.ingest_all()
    [(in_jvm, checked, by_reference)] = re.findall(
        r"(\d+) records decoded in the JVM \((\d+) of them checked against the reference\), (\d+) by the",
        jvm_run.stdout,
    )
    assert int(in_jvm) > 2000 and int(checked) > 20 and int(by_reference) > 100
    assert decoded_in_jvm(env) == int(in_jvm)  # the batch history keeps the share the log told
    _check_spooled(jvm_run.stdout)

    twin = new_env(
        pg,
        kafka,
        env.pipelines_dir,
        f"it_{uuid.uuid4().hex[:10]}",
        env.topic,
        create_table="schema" not in declared,
        dead_letter={"max_fraction": 0.75},
        **declared,
    )
    if "schema" in declared:
        assert not [p for p in prepare_targets([twin.pipeline], "test") if isinstance(p, Exception)]
    monkeypatch.setenv("MICROINGEST_JVM_DECODING", "off")
    [reference_run] = twin.ingest_all()
    assert "decoded by the reference decoder in Python: MICROINGEST_JVM_DECODING is off" in reference_run.stdout
    assert decoded_in_jvm(twin) == 0
    _check_spooled(reference_run.stdout)

    jvm_rows, jvm_dead = stored(env, columns)
    reference_rows, reference_dead = stored(twin, columns)
    # Every record sent is a row or a dead letter, exactly once: a record both paths lost would pass the comparison.
    landed = [(p, o) for _, p, o, *_ in jvm_rows] + [(p, o) for _, p, o, *_ in jvm_dead]
    assert sorted(landed) == sorted(positions)
    assert len(jvm_rows) > 1500 and len(jvm_dead) > 50  # both kinds of record were there
    assert jvm_rows == reference_rows
    assert jvm_dead == reference_dead


def _check_spooled(log: str) -> None:
    """Each batch's collection as its log tells it: past a bound of under 64 KiB, in several chunks and on disk."""
    told = re.findall(r"collected in (\d+) chunk\(s\), ([\d,]+) bytes of COPY data (in memory|on disk)", log)
    assert told
    if float(os.environ.get("MICROINGEST_BATCH_MEMORY_MB", "64")) < 0.0625:
        assert all(int(chunks) > 1 and where == "on disk" for chunks, _, where in told), told


@pytest.mark.parametrize("declared", [{}, {"transform_sql": "SELECT * FROM batch"}], ids=["collected", "statement"])
def test_a_wrong_jvm_value_in_the_sample_sends_the_batch_to_the_reference(env, declared):
    """Checked on the driver as it collects, or on the executors where the rows stay in Spark for a statement."""
    if declared:
        env.redeclare(**declared)
    produced = env.produce(400)
    [run] = env.ingest_all(env_extra={"MICROINGEST_FAULT": "jvm_self_check:corrupt"})
    assert "differs from the reference's; this batch and the rest of the job are decoded by the reference" in run.stdout
    assert env.landed_once() == sorted(produced)
    changed = env.query(sql.SQL("SELECT count(*) FROM {} WHERE event_id LIKE '%%~'").format(env.table))
    assert changed == [(0,)], "the corrupted values were not written"
    assert decoded_in_jvm(env) == 0


def test_a_job_of_another_build_of_the_decoder_decodes_with_its_own_build_in_a_session_of_its_own(env, tmp_path):
    """A Spark Connect session keeps the classes of the first decoder jar it was sent, so each build of the jar shares
    a session of its own (`connect.shared_session_id`). A job of another build (here: the same jar with one more
    entry, so other bytes), as after an upgrade beside a long-lived server, still decodes in the JVM, with the jar it
    was built with, and no restart of the server; the first build's jobs go on in theirs."""
    first = env.produce(200)
    [ours] = env.ingest_all()
    assert "records decoded in Spark's JVM" in ours.stdout
    other = tmp_path / "microingest-decoders.jar"
    shutil.copy(settings.decoder_jar(), other)
    with zipfile.ZipFile(other, "a") as jar:
        jar.writestr("another-build.txt", uuid.uuid4().hex)
    more = env.produce(200, start=200)
    [theirs] = env.ingest_all(env_extra={"MICROINGEST_DECODER_JAR": str(other)})
    assert "records decoded in Spark's JVM" in theirs.stdout, theirs.stdout[-3000:]
    assert "another build of microingest" not in theirs.stdout
    last = env.produce(200, start=400)
    [again] = env.ingest_all()
    assert "records decoded in Spark's JVM" in again.stdout and "another build" not in again.stdout
    env.assert_exactly_once(first + more + last)
    assert decoded_in_jvm(env) == 600


def test_a_spark_submit_without_the_decoder_on_its_jars_decodes_by_the_reference(submit_env, tmp_path, monkeypatch):
    """A Spark application that cannot load the decoder's class (here: the jar the job names holds no such class, so
    spark-submit's --jars lacks it) says so and decodes by the reference; every record still lands once."""
    env = submit_env
    produced = env.produce(300)
    empty = tmp_path / "microingest-decoders.jar"
    with zipfile.ZipFile(empty, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
    monkeypatch.setenv("MICROINGEST_DECODER_JAR", str(empty))
    result = env.spark_job(list(plan_live_run(env.pipeline).ranges))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    log = result.stdout + result.stderr
    assert "Spark cannot load the JVM decoder" in log and "on --jars" in log
    env.assert_exactly_once(produced)
