"""Backfills by offset range and by time against the real broker, Postgres and Spark: they replay exactly what Kafka
holds in the asked ranges, stay below the live position, and settle overlap with the target by policy."""

import time
from datetime import datetime, timezone

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ConfigResource
from psycopg2 import sql

from helpers.pipeline_env import UPSERT_TARGET, read_to_end
from microingest.batches import RunInfo
from microingest.commit.overlap import OverlapError
from microingest.errors import REFUSED_EXIT
from microingest.plan.backfill import plan_backfill
from microingest.plan.live import plan_live_run
from microingest.plan.offsets import RequestError
from microingest.plan.request import parse_request
from microingest.systems.kafka_access import json_bytes, produce

BACKFILL = RunInfo(dag_id="microingest_test", run_id="manual__backfill")


def recent_ms() -> int:
    """A whole second an hour ago, in epoch ms. Record timestamps in tests must be recent: the broker deletes
    records older than its retention (7 days), even from the active segment."""
    return (int(time.time()) - 3600) * 1000


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat()


def request(**params):
    return parse_request(params, "manual")


def by_partition(produced):
    out = {}
    for p, o, e in produced:
        out.setdefault(p, []).append((p, o, e))
    return out


@pytest.mark.quick
def test_a_pipeline_started_at_latest_fills_its_history_and_every_record_lands_once(env):
    env.redeclare(start_from="latest", max_records_per_batch=250)
    history = env.produce(900)
    assert plan_live_run(env.pipeline).ranges == ()  # pins every partition at its end: history is not read
    live = env.produce(300, start=900)
    env.ingest_all()
    assert env.landed_once() == sorted(live)
    pins = {p: min(o for q, o, _ in live if q == p) for p in {q for q, _, _ in live}}

    offsets = {str(p): [0, pins[p]] for p in pins}
    plan = plan_backfill(env.pipeline, request(backfill_ranges=offsets))
    assert plan.total_records == 900 and plan.batches_needed == 4
    result = env.spark_job(plan, run=BACKFILL)

    assert result.returncode == 0, result.stdout[-3000:]
    assert env.landed_once() == sorted(history + live)
    assert env.ledger() == {p: max(o for q, o, _ in live if q == p) + 1 for p in pins}, "the live ledger never moved"
    kinds = env.query(
        "SELECT kind, count(*), sum(records_read) FROM microingest.batches WHERE pipeline = %s "
        "AND run_id = %s GROUP BY kind",
        (env.pipeline.name, BACKFILL.run_id),
    )
    assert kinds == [("backfill", 4, 900)]


def test_overlap_is_refused_by_default_replaced_or_skipped_on_request(env):
    produced = env.produce(600)
    env.ingest_all()
    parts = by_partition(produced)
    p = max(parts, key=lambda k: len(parts[k]))
    wanted = {str(p): [10, 60]}

    with pytest.raises(OverlapError) as err:
        plan_backfill(env.pipeline, request(backfill_ranges=wanted))
    assert f"{env.topic}[{p}] [10, 60) (50 records)" in str(err.value)

    # Rows of a rebuilt window: 20 of the 50 positions are gone from the target.
    env.query_commit(
        sql.SQL("DELETE FROM {} WHERE source_partition = %s AND source_offset >= 30 AND source_offset < 50").format(
            env.table
        ),
        (p,),
    )
    skip = plan_backfill(env.pipeline, request(backfill_ranges=wanted, overlap="skip_existing"))
    result = env.spark_job(skip, run=RunInfo("microingest_test", "manual__skip"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert env.landed_once() == sorted(produced)
    [(read, written)] = env.query(
        "SELECT records_read, rows_written FROM microingest.batches WHERE pipeline = %s AND run_id = %s",
        (env.pipeline.name, "manual__skip"),
    )
    assert (read, written) == (50, 20)

    replace = plan_backfill(env.pipeline, request(backfill_ranges=wanted, overlap="replace"))
    result = env.spark_job(replace, run=RunInfo("microingest_test", "manual__replace"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert env.landed_once() == sorted(produced)
    [(batch_id,)] = env.query(
        "SELECT batch_id::text FROM microingest.batches WHERE pipeline = %s AND run_id = %s",
        (env.pipeline.name, "manual__replace"),
    )
    rewritten = env.query(
        sql.SQL("SELECT source_offset FROM {} WHERE batch_id = %s ORDER BY 1").format(env.table), (batch_id,)
    )
    assert [o for (o,) in rewritten] == list(range(10, 60))


def test_a_backfill_cannot_reach_the_live_position_and_is_fenced_if_it_was_planned_past_it(env):
    produced = env.produce(300)
    env.ingest_all()
    env.produce(60, start=300)  # newer than the live position: the live pipeline's
    ledger = env.ledger()
    p = next(iter(ledger))
    with pytest.raises(RequestError) as err:
        plan_backfill(env.pipeline, request(backfill_ranges={str(p): [0, ledger[p] + 1]}))
    assert err.value.field == f"backfill_ranges['{p}']" and "above the live position" in str(err.value)

    # A plan made when the range was below a live position that is gone by commit time (ledger rolled back by
    # hand here) is fenced inside the commit transaction.
    plan = plan_backfill(env.pipeline, request(backfill_ranges={str(p): [0, ledger[p]]}, overlap="replace"))
    env.query_commit(
        "UPDATE microingest.ledger SET next_offset = 1 WHERE pipeline = %s AND partition = %s", (env.pipeline.name, p)
    )
    result = env.spark_job(plan, run=BACKFILL)
    assert result.returncode == REFUSED_EXIT and "reaches offsets the live pipeline owns" in result.stdout
    assert env.landed_once() == sorted(produced)


def test_a_time_window_replays_exactly_the_records_timestamped_inside_it(env, kafka):
    base = recent_ms()
    producer = KafkaProducer(**kafka, acks="all")
    sent = []
    for i in range(240):  # one record per second of "event time", round robin over the partitions
        future = producer.send(
            env.topic,
            key=f"k{i}".encode(),
            partition=i % 3,
            timestamp_ms=base + i * 1000,
            value=json_bytes({"event_id": f"ev-{i}"}),
        )
        sent.append((future, i))
    producer.flush()
    produced = [(f.get(10).partition, f.get(10).offset, f"ev-{i}", i) for f, i in sent]
    producer.close()
    env.redeclare(start_from="latest")
    plan_live_run(env.pipeline)  # pins every partition at its end: everything is history

    window = request(backfill_from_time=iso(base + 100_000), backfill_until_time=iso(base + 160_000))
    start_ms = int(window.window[0].timestamp() * 1000)
    plan = plan_backfill(env.pipeline, window)
    result = env.spark_job(plan, run=BACKFILL)

    assert result.returncode == 0, result.stdout[-3000:]
    inside = sorted((p, o, e) for p, o, e, i in produced if start_ms <= base + i * 1000 < start_ms + 60_000)
    assert len(inside) == 60 and env.landed_once() == inside


def test_upsert_replays_never_overwrite_a_newer_row_nor_bring_back_a_deleted_key(env):
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest")
    base = recent_ms()
    # (partition, key, version or None for a tombstone, Kafka timestamp offset in seconds)
    script = [
        (0, "k1", "v1", 1),
        (0, "k1", "v2", 2),
        (0, "k2", "v1", 3),
        (0, "k2", None, 4),
        (0, "k3", "new", 5),
        (1, "k3", "old", 0),
        (1, "k4", "v1", 6),
        (0, "k5", "old", 7),
        (1, "k5", "new", 10),
    ]
    records = [
        (k.encode(), None if v is None else json_bytes({"event_id": f"{k}-{v}", "user_id": k})) for _, k, v, _ in script
    ]
    produce(
        env.kafka,
        env.topic,
        records,
        partition_of=lambda i, _: script[i][0],
        timestamp_of=lambda i: base + script[i][3] * 1000,
    )
    expected = {"k1": "k1-v2", "k3": "k3-new", "k4": "k4-v1", "k5": "k5-new"}
    latest = "SELECT record_key, event_id FROM {} ORDER BY 1"

    env.ingest_all()
    assert dict(env.query(sql.SQL(latest).format(env.table))) == expected
    assert env.query(
        "SELECT record_key, source_offset FROM microingest.upsert_tombstones WHERE pipeline = %s", (env.pipeline.name,)
    ) == [("k2", 3)]

    # Replay everything; skip_existing leaves out the positions the rows hold, so every replayed record is older
    # than its key's row (k1 v1; k3 and k5 from the other partition, older by timestamp) or than k2's tombstone.
    ledger = env.ledger()
    plan = plan_backfill(
        env.pipeline, request(backfill_ranges={str(p): [0, o] for p, o in ledger.items()}, overlap="skip_existing")
    )
    result = env.spark_job(plan, run=BACKFILL)
    assert result.returncode == 0, result.stdout[-3000:]
    assert dict(env.query(sql.SQL(latest).format(env.table))) == expected
    [(kind, read)] = env.query(
        "SELECT kind, records_read FROM microingest.batches WHERE pipeline = %s AND kind = 'backfill'",
        (env.pipeline.name,),
    )
    assert (kind, read) == ("backfill", len(script))


def test_a_time_window_keeps_out_records_timestamped_outside_it_among_those_inside(env):
    """Producers' clocks are not monotonic. The window's offsets run from the first record timestamped at or after
    its start to the first at or after its end; inside that span a record timestamped before the window (written
    late, by a slow clock) is not the window's, and is not replayed."""
    t0 = recent_ms()
    stamps = [t0 - 10_000, t0 + 1_000, t0 - 5_000, t0 + 2_000, t0 + 20_000, t0 + 3_000]
    sent = produce(
        env.kafka,
        env.topic,
        [(b"k", json_bytes({"event_id": f"ev-{i}"})) for i in range(6)],
        partition_of=lambda i, key: 0,
        timestamp_of=lambda i: stamps[i],
    )
    assert sent == [(0, i) for i in range(6)]
    env.redeclare(start_from="latest")
    plan_live_run(env.pipeline)  # pins every partition at its end: everything is history

    plan = plan_backfill(env.pipeline, request(backfill_from_time=iso(t0), backfill_until_time=iso(t0 + 10_000)))
    assert [(r.partition, r.from_offset, r.until_offset) for r in plan.ranges] == [(0, 1, 4)]
    result = env.spark_job(plan, run=BACKFILL)

    assert result.returncode == 0, result.stdout[-3000:]
    # ev-2 lies inside the span but is timestamped before the window; ev-5, inside the window but written after the
    # first record past its end, lies beyond the span (docs/running.md says so: replay such a record by offsets).
    assert env.landed_once() == [(0, 1, "ev-1"), (0, 3, "ev-3")]


def retained_offsets(env, partition: int) -> set[int]:
    """The offsets of `partition` that Kafka still serves: those the log cleaner has not removed."""
    return {o for _, o, *_ in read_to_end(env.kafka, env.topic, partitions=[partition])}


def compact_below(env, live: int, stamp: int) -> set[int]:
    """Make the topic compacted and feed its hot keys newer versions above the live position, in bursts that roll
    segments, until the log cleaner has removed some record below `live`; returns the offsets below it still there."""
    admin = KafkaAdminClient(**env.kafka)
    admin.alter_configs(
        [
            ConfigResource(
                "TOPIC",
                env.topic,
                configs={
                    "cleanup.policy": "compact",
                    "segment.ms": "100",
                    "min.cleanable.dirty.ratio": "0.01",
                    "min.compaction.lag.ms": "0",
                    "delete.retention.ms": "100",
                },
            )
        ]
    )
    admin.close()
    deadline, burst = time.time() + 90, 0
    while len(kept := {o for o in retained_offsets(env, 0) if o < live}) == live and time.time() < deadline:
        burst += 1  # the broker rolls a segment by record timestamps: each burst a second after the previous one
        env.send_to(
            0,
            [(f"hot-{k}".encode(), json_bytes({"event_id": f"h{k}-new{burst}"})) for k in range(4)],
            stamp + burst * 1000,
        )
        time.sleep(0.5)
    assert len(kept) < live, "the log cleaner removed superseded records of the ingested range within 90 s"
    return kept


def test_replace_on_a_compacted_topic_rewrites_the_replayed_positions_and_keeps_those_compaction_removed(env):
    """A replay of a compacted range reads only what the log cleaner left. `replace` rewrites exactly those
    positions; the rows and dead letters of records Kafka no longer holds stay, as no backfill could bring them back."""
    env.redeclare(dead_letter={"max_fraction": 0.5})  # after compaction, 1 of the 7 or so records left is bad
    stamp = recent_ms()
    records = []  # stable keys written once (compaction keeps them), hot keys in several versions
    for round_ in range(6):
        records += [(f"stable-{round_}", f"s{round_}")] + [(f"hot-{k}", f"h{k}-v{round_}") for k in range(4)]
    records[7], records[18] = ("hot-1", None), ("stable-bad", None)  # dead letters: one superseded, one kept
    sent = env.send_to(
        0, [(k.encode(), b"not json" if e is None else json_bytes({"event_id": e})) for k, e in records], stamp
    )
    env.ingest_all()
    rows, dead = env.landed_once(), [(o, c) for _, o, c, *_ in env.dead_letters()]
    assert len(rows) == len(records) - 2 and dead == [(sent[7][1], "invalid_json"), (sent[18][1], "invalid_json")]
    live = env.ledger()[0]

    kept = compact_below(env, live, stamp)
    plan = plan_backfill(env.pipeline, request(backfill_ranges={"0": [0, live]}, overlap="replace"))
    result = env.spark_job(plan, run=RunInfo("microingest_test", "manual__compacted"))

    assert result.returncode == 0, result.stdout[-3000:]
    assert env.landed_once() == rows, "every row is there once, those whose records compaction removed included"
    assert [(o, c) for _, o, c, *_ in env.dead_letters()] == dead
    [(batch_id, read)] = env.query(
        "SELECT batch_id::text, records_read FROM microingest.batches WHERE pipeline = %s AND run_id = %s",
        (env.pipeline.name, "manual__compacted"),
    )
    rewritten = env.query(
        sql.SQL(
            'SELECT source_offset FROM {} WHERE batch_id = %s UNION ALL SELECT "offset" FROM '
            "microingest.dead_letters WHERE batch_id = %s"
        ).format(env.table),
        (batch_id, batch_id),
    )
    replayed = {o for (o,) in rewritten}
    # The cleaner may have removed more since `kept` was read, never less; stable keys have one record each.
    stable = {o for (_, o), (k, _) in zip(sent, records) if k.startswith("stable")}
    assert len(rewritten) == read and stable <= replayed <= kept, "exactly the replayed positions were rewritten"


def test_replace_on_a_compacted_topic_keeps_an_upsert_row_whose_record_a_newer_dead_letter_superseded(env):
    """An upsert_latest row holds its key's newest good record; when a newer record of the key was a dead letter,
    compaction removes the row's record and keeps the dead letter's. `replace` rewrites the replayed rows and dead
    letters and leaves that row alone: no replay could bring it back."""
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest", dead_letter={"max_fraction": 0.5})
    stamp = recent_ms()
    records = [
        (b"k1", json_bytes({"event_id": "k1-v1"})),
        (b"k1", b"not json"),
        (b"k2", json_bytes({"event_id": "k2-v1"})),
        (b"k2", json_bytes({"event_id": "k2-v2"})),
        (b"k3", json_bytes({"event_id": "k3-v1"})),
    ]
    assert env.send_to(0, records, stamp) == [(0, o) for o in range(5)]
    env.ingest_all()
    latest = sql.SQL("SELECT record_key, source_offset, event_id, batch_id::text FROM {} ORDER BY 1").format(env.table)
    before = env.query(latest)
    assert [(k, o, e) for k, o, e, _ in before] == [("k1", 0, "k1-v1"), ("k2", 3, "k2-v2"), ("k3", 4, "k3-v1")]

    kept = compact_below(env, 5, stamp)
    assert {0, 2}.isdisjoint(kept), "the cleaner removed k1's and k2's superseded records"
    plan = plan_backfill(env.pipeline, request(backfill_ranges={"0": [0, 5]}, overlap="replace"))
    result = env.spark_job(plan, run=RunInfo("microingest_test", "manual__compacted"))

    assert result.returncode == 0, result.stdout[-3000:]
    [(batch_id,)] = env.query(
        "SELECT batch_id::text FROM microingest.batches WHERE pipeline = %s AND run_id = %s",
        (env.pipeline.name, "manual__compacted"),
    )
    assert env.query(latest) == [before[0], ("k2", 3, "k2-v2", batch_id), ("k3", 4, "k3-v1", batch_id)]
    assert [(o, c) for _, o, c, *_ in env.dead_letters()] == [(1, "invalid_json")]
    assert env.query(
        "SELECT batch_id::text FROM microingest.dead_letters WHERE pipeline = %s", (env.pipeline.name,)
    ) == [(batch_id,)]
