"""Kafka's awkward corners: partitions added between runs, transactional producers, retention gaps."""

import json
import subprocess
import time

import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, NewPartitions
from psycopg2 import sql

from helpers.pipeline_env import UPSERT_TARGET, read_to_end
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_live_run, plan_next_batch
from microingest.plan.offsets import RetentionGapError, TopicRecreatedError
from microingest.systems.kafka_access import KafkaAccessError, create_topic, partition_bounds


def grow_to_five_partitions_and_produce(env, count: int, start: int) -> list:
    """The topic's 3 partitions made 5, then `count` records produced onto all of them, the new ones too."""
    admin = KafkaAdminClient(**env.kafka)
    admin.create_partitions({env.topic: NewPartitions(total_count=5)})
    admin.close()
    produced = env.produce(count, start=start)
    assert {p for p, _, _ in produced} >= {3, 4}, "the producer spreads the new records onto the new partitions too"
    return produced


def test_partitions_added_between_runs_are_discovered_and_read_from_the_start(env):
    first = env.produce(300)
    env.ingest_all()
    more = grow_to_five_partitions_and_produce(env, 500, start=300)

    env.ingest_all()

    assert env.target_rows() == sorted(first + more)
    assert set(env.ledger()) == {0, 1, 2, 3, 4}


def test_transactional_topic_reads_committed_records_only_and_does_not_stall(env):
    producer = KafkaProducer(**env.kafka, transactional_id=f"tx-{env.pipeline.name}", acks="all")
    producer.init_transactions()
    committed = []
    for txn in range(6):
        producer.begin_transaction()
        events = [f"t{txn}-{i}" for i in range(25)]
        for event in events:
            producer.send(env.topic, key=event.encode(), value=json.dumps({"event_id": event}).encode())
        producer.flush()
        if txn % 3 == 2:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
            committed += events
    producer.close()
    _earliest, latest = partition_bounds(env.kafka, env.topic)
    assert sum(latest.values()) > len(committed), "markers and aborted records take offsets"

    env.ingest_all()

    assert sorted(e for _, _, e in env.target_rows()) == sorted(committed)
    assert env.ledger() == latest, "the ledger reaches the end of every partition: nothing stalls on skipped offsets"
    assert plan_next_batch(env.pipeline).ranges == ()


def test_retention_gap_fails_by_default_and_skipping_it_is_recorded(env):
    produced = env.produce(300)
    env.redeclare(max_records_per_batch=60)
    plan = plan_next_batch(env.pipeline)
    assert env.spark_job(list(plan.ranges)).returncode == 0
    ledger = env.ledger()
    partition = max(ledger, key=lambda p: sum(1 for q, _, _ in produced if q == p))
    cut = ledger[partition] + 10
    admin = KafkaAdminClient(**env.kafka)
    admin.delete_records({TopicPartition(env.topic, partition): cut})
    admin.close()

    with pytest.raises(RetentionGapError) as err:
        plan_next_batch(env.pipeline)
    assert f"{env.topic}[{partition}]" in str(err.value)
    assert f"[{ledger[partition]}, {cut})" in str(err.value)

    env.redeclare(on_retention_gap="skip", max_records_per_batch=100_000)
    env.ingest_all()

    lost = {(p, o) for p, o, _ in produced if p == partition and ledger[partition] <= o < cut}
    assert {(p, o) for p, o, _ in env.target_rows()} == {(p, o) for p, o, _ in produced} - lost
    gaps = env.query(
        "SELECT gaps FROM microingest.batches WHERE pipeline = %s AND gaps IS NOT NULL", (env.pipeline.name,)
    )
    assert gaps == [([{"topic": env.topic, "partition": partition, "from": ledger[partition], "until": cut}],)]


def test_compacted_topic_with_offset_holes_is_read_without_stalling(env):
    """Compaction removes superseded records from the middle of the log; those holes are not data loss."""
    admin = KafkaAdminClient(**env.kafka)
    admin.alter_configs(
        [
            ConfigResource(
                "TOPIC",
                env.topic,
                configs={
                    "cleanup.policy": "compact",
                    "segment.ms": "100",
                    "min.cleanable.dirty.ratio": "0.001",
                    "min.compaction.lag.ms": "0",
                    "delete.retention.ms": "100",
                },
            )
        ]
    )
    admin.close()
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest")
    latest = {}
    for round_ in range(12):  # many versions of few keys, in bursts so segments roll and get cleaned
        records = []
        for k in range(8):
            event = f"v{round_}-k{k}"
            records.append((f"key-{k}".encode(), json.dumps({"event_id": event}).encode()))
            latest[f"key-{k}"] = event
        env.send(records)
        time.sleep(0.3)
    deadline = time.time() + 90
    while time.time() < deadline and len(read_to_end(env.kafka, env.topic)) == 96:
        time.sleep(2)
    kept = read_to_end(env.kafka, env.topic)
    assert len(kept) < 96, "the log cleaner compacted the topic, leaving holes in the offsets"

    env.ingest_all()

    rows = env.query(f"SELECT record_key, event_id FROM {env.pipeline.target_table}")
    assert dict(rows) == latest
    _, end = partition_bounds(env.kafka, env.topic)
    assert env.ledger() == {p: o for p, o in end.items() if o}, "the ledger reaches the end despite the holes"


def test_partitions_added_after_a_latest_pipeline_started_lose_nothing_written_before_the_next_run(env):
    """start_from latest pins the partitions a pipeline starts with; one added later is read from its start, even
    what producers wrote to it before any run saw it."""
    env.redeclare(start_from="latest")
    env.produce(100)  # history the pipeline never reads
    assert env.ingest_all() == [] and len(env.ledger()) == 3
    after = grow_to_five_partitions_and_produce(env, 400, start=100)

    env.ingest_all()

    env.assert_exactly_once(after)
    assert set(env.ledger()) == {0, 1, 2, 3, 4}


def recreate_topic(env, partitions: int) -> None:
    """Delete the pipeline's topic and create it again under its name, as an operator's script might."""
    admin = KafkaAdminClient(**env.kafka)
    admin.delete_topics([env.topic])
    admin.close()
    deadline = time.monotonic() + 60
    while True:  # the broker finishes a deletion in the background; the name is free once it has
        try:
            if create_topic(env.kafka, env.topic, partitions):
                return
        except KafkaAccessError:
            pass
        assert time.monotonic() < deadline, "the topic was not created again within 60 s"
        time.sleep(1)


def test_a_topic_deleted_and_created_again_is_refused_then_restarted_with_nothing_lost(env):
    """The new user's case: 900 records ingested, the topic recreated, 3,000 new records. Reading on from the old
    positions would leave the new topic's first offsets unread; the plan tells the topics apart by Kafka's id."""
    env.produce(900)
    env.ingest_all()
    old = env.ledger()
    recreate_topic(env, 3)
    new = env.produce(3000, start=900)
    assert all(max(o for q, o, _ in new if q == p) >= old[p] for p in old), "the new topic grew past the old positions"

    with pytest.raises(TopicRecreatedError, match="deleted and created again") as refused:
        plan_live_run(env.pipeline)
    assert "on_topic_recreated: restart" in str(refused.value)
    lag = subprocess.run(["microingest", "lag", env.pipeline.name], capture_output=True, text=True, timeout=120)
    assert "ERR" in lag.stdout and "deleted and created again" in lag.stdout
    assert env.ledger() == old, "nothing moved"

    env.redeclare(on_topic_recreated="restart")
    look = plan_live_run(env.pipeline, record_pins=False)  # a dry run plans the restart without making it
    assert {r.partition: r.from_offset for r in look.ranges} == {p: 0 for p in old} and env.ledger() == old
    before = env.target_rows()
    env.ingest_all()

    # The old topic's rows stay, moved aside under a name no topic can have; the new topic's land beside them.
    [(ranges, note)] = env.query(
        "SELECT ranges, note FROM microingest.batches WHERE pipeline = %s AND kind = 'restart'", (env.pipeline.name,)
    )
    assert {r["partition"]: r["from"] for r in ranges} == old and "deleted and created again" in note
    aside = topics_of(env) - {env.topic}
    assert len(aside) == 1 and next(iter(aside)).startswith(f"{env.topic}@") and "900 target row(s)" in note
    assert rows_of(env, env.topic) == sorted(new) and rows_of(env, *aside) == before
    lag = subprocess.run(["microingest", "lag", env.pipeline.name], capture_output=True, text=True, timeout=120)
    assert " restart " in lag.stdout and "ERR" not in lag.stdout


def test_a_batch_planned_on_the_old_topic_is_fenced_after_the_restart(env):
    env.produce(50)
    env.ingest_all()
    env.produce(30, start=50)
    stale = plan_live_run(env.pipeline)
    recreate_topic(env, 3)
    fresh = env.produce(300, start=80)
    env.redeclare(on_topic_recreated="restart")
    env.query_commit(sql.SQL("DELETE FROM {}").format(env.table))
    env.ingest_all()

    late = env.spark_job(stale)  # its offsets exist on the new topic too: only the topic id tells them apart
    assert late.returncode == REFUSED_EXIT and "the topic was deleted and created again" in late.stdout
    env.assert_exactly_once(fresh)


def topics_of(env) -> set[str]:
    return {t for (t,) in env.query(sql.SQL("SELECT DISTINCT source_topic FROM {}").format(env.table))}


def rows_of(env, topic: str) -> list[tuple[int, int, str]]:
    statement = sql.SQL("SELECT source_partition, source_offset, event_id FROM {} WHERE source_topic = %s")
    rows = env.query(statement.format(env.table), (topic,))
    assert len(rows) == len({(p, o) for p, o, _ in rows}), "a position landed twice"
    return sorted(rows)


def keyed(key: str, event_id: str) -> tuple[bytes, bytes]:
    return key.encode(), json.dumps({"event_id": event_id, "user_id": key}).encode()


def test_a_restarted_topic_under_upsert_gives_each_key_its_new_record_and_its_dead_letters_a_place(env):
    """The new user's case under upsert_latest: 30 keys written 10 times (one of them deleted, one record bad), the
    topic recreated, one new value per key (one bad at the old bad record's position) and a tombstone. Every key
    ends on its newest record: the old topic's rows, tombstones and dead letters, moved aside by the restart, are
    never compared by offset with the new topic's."""
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest", on_topic_recreated="restart", max_records_per_batch=120)
    keys = [f"k{i}" for i in range(30)]
    old = [keyed(k, f"{k}-old-{n}") for n in range(10) for k in keys]
    old[5] = (b"k5", b"{not json")
    old.append((b"k9", None))  # k9 deleted on the old topic: its tombstone is remembered
    env.send_to(0, old)
    env.ingest_all()
    assert env.query("SELECT count(*) FROM microingest.upsert_tombstones WHERE pipeline = %s", (env.pipeline.name,))[
        0
    ] == (1,)

    recreate_topic(env, 3)
    new = [keyed(k, f"{k}-new") for k in keys]
    new[5] = (b"k5", b"{not json either")  # at offset 5, where the old topic left its dead letter
    new.append((b"k7", None))
    env.send_to(0, new)
    env.ingest_all()

    rows = dict(env.query(f"SELECT record_key, event_id FROM {env.pipeline.target_table}"))
    assert rows == {k: f"{k}-new" for k in keys if k not in ("k5", "k7")} | {"k5": "k5-old-9"}
    letters = env.query(
        'SELECT topic, "offset", error_class FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 1',
        (env.pipeline.name,),
    )
    assert [(t == env.topic, o, cls) for t, o, cls in letters] == [
        (True, 5, "invalid_json"),
        (False, 5, "invalid_json"),
    ]
    assert letters[1][0].startswith(f"{env.topic}@")
    ledger = env.ledger()
    assert ledger == {0: len(new)}, "the new topic read to its end"


def test_a_restarted_topic_under_aggregate_counts_both_topics_each_record_once(env):
    env.replace_target("event_type text PRIMARY KEY, events bigint NOT NULL")
    env.redeclare(
        sink_mode="aggregate",
        aggregate={"group_by": ["event_type"], "measures": {"events": "count"}},
        schema={"event_id": "string", "event_type": {"type": "string", "required": True}},
        on_topic_recreated="restart",
        dead_letter={"max_fraction": 0.5},
    )

    def events(n: int) -> list[tuple[bytes, bytes]]:
        return [(b"k", json.dumps({"event_id": f"e{i}", "event_type": "click"}).encode()) for i in range(n)]

    env.send_to(0, events(6)[:1] + [(b"k", b"{bad")] + events(6)[1:])
    env.ingest_all()
    recreate_topic(env, 3)
    env.send_to(0, events(4)[:1] + [(b"k", b"{bad again")] + events(4)[1:])
    env.ingest_all()

    assert env.query(f"SELECT event_type, events FROM {env.pipeline.target_table}") == [("click", 10)]
    letters = env.query(
        'SELECT topic, "offset" FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 1', (env.pipeline.name,)
    )
    assert [(t == env.topic, o) for t, o in letters] == [(True, 1), (False, 1)]
