"""upsert_latest and aggregate sinks against real Kafka, Spark and Postgres, across several capped batches."""

import json
import struct
import time
from collections import defaultdict
from datetime import datetime, timedelta, timezone

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions
from psycopg2 import sql

from helpers.pipeline_env import UPSERT_TARGET
from microingest.commit.overlap import OverlapError
from microingest.plan.backfill import plan_backfill
from microingest.plan.request import parse_request


def reading(device, seq, temp):
    return json.dumps({"event_id": f"{device}-{seq}", "user_id": device, "amount": temp}).encode()


@pytest.mark.quick
def test_upsert_latest_keeps_the_last_value_per_key_and_applies_tombstones(env):
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest", max_records_per_batch=37)
    records, expected = [], {}
    for seq in range(60):  # 6 devices, 10 readings each, interleaved; device-3 deleted midway, then back
        device = f"device-{seq % 6}"
        if device == "device-3" and seq == 33:
            records.append((device.encode(), None))
            expected.pop(device, None)
            continue
        records.append((device.encode(), reading(device, seq, float(seq))))
        expected[device] = (f"{device}-{seq}", float(seq))
    records.append((None, reading("nokey", 0, 1.0)))  # upsert needs a key: dead letter
    records.append((b"device-5", None))  # tombstone as the very last record of a key
    expected.pop("device-5")
    env.send(records)

    env.ingest_all()

    assert env.batch_count() >= 2, "the cap spreads the records over several batches"
    rows = env.query(f"SELECT record_key, event_id, amount FROM {env.pipeline.target_table} ORDER BY 1")
    assert {k: (e, a) for k, e, a in rows} == expected
    assert [(cls) for _, _, cls, *_ in env.dead_letters()] == ["null_key"]


def test_upsert_latest_orders_a_key_across_partitions_by_timestamp_in_either_commit_order(env):
    """Keys first written to partition 0, then (after the topic grew) newer records of the same keys in partition 3.
    With a cap of 4 the run commits offsets [0, 2), [2, 4), ... of both partitions per batch, so the newer record
    comes in a later batch (j), the same batch at a lower offset (m, t, u), or an earlier batch (k, w) than the older
    one; in every case the newer record (by Kafka timestamp) decides, tombstones included."""
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest", max_records_per_batch=4)
    now_ms = int(time.time() * 1000)

    def write(partition, records, timestamp_ms):
        values = [None if v is None else json.dumps({"event_id": v, "user_id": k}).encode() for k, v in records]
        return env.send_to(partition, [(k.encode(), v) for (k, _), v in zip(records, values)], timestamp_ms)

    old = [
        ("j", "j-old"),
        ("m", "m-old"),
        ("t", "t-old"),
        ("u", None),
        ("f0", "f0"),
        ("f1", "f1"),
        ("k", "k-old"),
        ("w", "w-old"),
    ]
    new = [
        ("m", "m-new"),
        ("k", "k-new"),
        ("u", "u-new"),
        ("t", None),
        ("j", "j-new"),
        ("w", None),
        ("f2", "f2"),
        ("f3", "f3"),
    ]
    assert {p for p, _ in write(0, old, now_ms - 60_000)} == {0}
    admin = KafkaAdminClient(**env.kafka)
    admin.create_partitions({env.topic: NewPartitions(total_count=4)})
    admin.close()
    assert {p for p, _ in write(3, new, now_ms)} == {3}

    env.ingest_all()

    assert env.batch_count() == 4
    rows = env.query(f"SELECT record_key, event_id, source_partition FROM {env.pipeline.target_table} ORDER BY 1")
    assert rows == [
        ("f0", "f0", 0),
        ("f1", "f1", 0),
        ("f2", "f2", 3),
        ("f3", "f3", 3),
        ("j", "j-new", 3),
        ("k", "k-new", 3),
        ("m", "m-new", 3),
        ("u", "u-new", 3),
    ]
    assert env.ledger() == {0: 8, 3: 8}


def test_aggregate_adds_counts_and_sums_exactly_once_across_batches(env):
    env.replace_target(
        "user_id text NOT NULL, bucket_start timestamptz NOT NULL, events bigint NOT NULL, "
        "amount_total bigint NOT NULL, PRIMARY KEY (user_id, bucket_start)"
    )
    env.redeclare(
        sink_mode="aggregate",
        max_records_per_batch=150,
        schema={
            "event_id": {"type": "string", "required": True},
            "user_id": {"type": "string", "required": True},
            "amount": "integer",
            "event_time": {"type": "timestamp", "required": True},
        },
        aggregate={
            "group_by": ["user_id"],
            "time_bucket": {"field": "event_time", "width": "1 hour"},
            "measures": {"events": "count", "amount_total": {"sum": "amount"}},
        },
    )
    start = datetime(2026, 5, 1, 9, 30, tzinfo=timezone.utc)
    expected = defaultdict(lambda: [0, 0])
    records = []
    for i in range(500):
        user, at, amount = f"user-{i % 7}", start + timedelta(minutes=i), i % 13
        records.append(
            (
                user.encode(),
                json.dumps(
                    {"event_id": str(i), "user_id": user, "amount": amount, "event_time": at.isoformat()}
                ).encode(),
            )
        )
        bucket = at.replace(minute=0)
        expected[(user, bucket)][0] += 1
        expected[(user, bucket)][1] += amount
    env.send(records)

    env.ingest_all()

    assert env.batch_count() == 4
    rows = env.query(f"SELECT user_id, bucket_start, events, amount_total FROM {env.pipeline.target_table}")
    assert {(u, b): [e, a] for u, b, e, a in rows} == {k: [c, float(s)] for k, (c, s) in expected.items()}
    assert sum(e for _, _, e, _ in rows) == 500

    # A backfill would count positions again: refused whatever the overlap policy, before anything is read.
    p = next(iter(env.ledger()))
    for policy in ("refuse", "replace", "skip_existing"):
        with pytest.raises(OverlapError, match="already counted and would be counted twice"):
            plan_backfill(env.pipeline, parse_request({"backfill_ranges": {str(p): [0, 5]}, "overlap": policy}))


def test_upsert_latest_keys_written_by_kafkas_numeric_serializers_are_keys_like_any_other(env):
    """IntegerSerializer keys hold NUL bytes, which Postgres text cannot: they are keyed by their escaped form
    (`\\x` + hex, see storable.key_text), updated and deleted like text keys, and SQL gives their bytes back."""
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest")
    records = [(struct.pack(">i", seq % 4), reading(f"d{seq % 4}", seq, float(seq))) for seq in range(12)]
    records += [(struct.pack(">i", 2), None), (b"\\x00000001", reading("text", 0, 0.5))]
    env.send_to(0, records)

    env.ingest_all()

    rows = env.query(
        sql.SQL(
            "SELECT record_key, CASE WHEN left(record_key, 2) = '\\x' THEN decode(substr("
            "record_key, 3), 'hex') ELSE convert_to(record_key, 'UTF8') END, event_id FROM {} "
            "ORDER BY 1"
        ).format(env.table)
    )
    assert [(k, bytes(b), e) for k, b, e in rows] == [
        ("\\x00000000", struct.pack(">i", 0), "d0-8"),
        ("\\x00000001", struct.pack(">i", 1), "d1-9"),
        ("\\x00000003", struct.pack(">i", 3), "d3-11"),
        ("\\x5c783030303030303031", b"\\x00000001", "text-0"),
    ]
    assert env.dead_letters() == []


def test_an_append_target_with_wider_columns_takes_its_rows_through_the_staging_table_unchanged(env):
    """Binary COPY sends each value in its declared type, which a wider column (numeric for bigint, bigint for
    integer, varchar for text) would not read: such a target's rows go through the staging table, where Postgres
    converts them, and land as they would in a table of the declared types."""
    env.replace_target(
        "source_topic text NOT NULL, source_partition bigint NOT NULL, source_offset numeric NOT NULL, "
        "kafka_timestamp timestamptz, batch_id uuid NOT NULL, event_id character varying NOT NULL, user_id text, "
        "event_type character varying, amount double precision, event_time timestamptz, "
        "UNIQUE (source_topic, source_partition, source_offset)"
    )
    amounts = [-0.0, 5e-324, 0.1, 1.7976931348623157e308, None]
    records = [
        (None, json.dumps({"event_id": f"e{i}", "amount": a, "event_time": 1700000000123 + i}).encode())
        for i, a in enumerate(amounts)
    ]
    sent = env.send_to(0, records)

    env.ingest_all()

    rows = env.query(
        sql.SQL("SELECT source_partition, source_offset, event_id, amount, event_time FROM {} ORDER BY 2").format(
            env.table
        )
    )
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert [(p, int(o), e, a, t) for p, o, e, a, t in rows] == [
        (p, o, f"e{i}", a, epoch + timedelta(milliseconds=1700000000123 + i))
        for i, ((p, o), a) in enumerate(zip(sent, amounts))
    ]
    assert [struct.pack(">d", a) for _, _, _, a, _ in rows[:4]] == [struct.pack(">d", a) for a in amounts[:4]]
    assert env.dead_letters() == []
