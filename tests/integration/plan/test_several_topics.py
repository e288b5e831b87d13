"""One pipeline, several topics into one table: a list of topics and a pattern that gains a topic while a run is in
flight, each (topic, partition, offset) landing once with its source_topic; backfills, skips and lag per topic; a
matched topic deleted is reported and its positions kept."""

import time
import uuid

import pytest
from kafka import KafkaAdminClient
from psycopg2 import sql

from helpers.pipeline_env import UPSERT_TARGET, Env, new_env
from microingest.lag.status import pipeline_status
from microingest.lag.text import status_lines
from microingest.plan.backfill import plan_backfill
from microingest.plan.live import plan_live_run
from microingest.plan.offsets import RequestError
from microingest.plan.redrive import plan_redrive
from microingest.plan.request import RedriveRequest, SkipRequest, parse_request
from microingest.plan.skip import plan_skip
from microingest.systems.kafka_access import create_topic, json_bytes, produce


def several(pg, kafka, tmp_path, monkeypatch, topics: dict[str, int], pattern: str | None = None, **declaration):
    """A pipeline of the test's own over topics <prefix>-<name> (created with their partition counts): those topics
    listed, or those matching <prefix>-<pattern>. Returns the env and the prefix."""
    prefix = f"it-{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "pipelines"
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(folder))
    for name, partitions in topics.items():
        create_topic(kafka, f"{prefix}-{name}", partitions)
    named = (
        {"topics": [f"{prefix}-{t}" for t in topics]} if pattern is None else {"topic_pattern": f"{prefix}-{pattern}"}
    )
    first = f"{prefix}-{next(iter(topics))}"
    env = new_env(pg, kafka, folder, f"it_{prefix[3:]}", first, **named, **declaration)
    return env, prefix


def send(env: Env, topic: str, n: int) -> list[tuple[str, int, int, str]]:
    """n events with ids <topic>/<i>; returns (topic, partition, offset, event_id) of each."""
    ids = [f"{topic}/{i}" for i in range(n)]
    records = [
        (i.encode(), json_bytes({"event_id": i, "user_id": "u", "event_type": "click", "amount": 0.5, "event_time": 1}))
        for i in ids
    ]
    return [(topic, p, o, i) for (p, o), i in zip(produce(env.kafka, topic, records), ids)]


def landed(env: Env) -> list[tuple[str, int, int, str]]:
    statement = sql.SQL("SELECT source_topic, source_partition, source_offset, event_id FROM {} ORDER BY 1, 2, 3")
    rows = env.query(statement.format(env.table))
    assert len(rows) == len({r[:3] for r in rows}), "a position landed twice"
    return rows


def ledgers(env: Env) -> dict[tuple[str, int], int]:
    statement = "SELECT topic, partition, next_offset FROM microingest.ledger WHERE pipeline = %s"
    return {(t, p): o for t, p, o in env.query(statement, (env.pipeline.name,))}


def log_ends(sent) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for t, p, o, _ in sent:
        ends[(t, p)] = max(ends.get((t, p), 0), o + 1)
    return ends


def test_two_topics_land_in_one_table_each_position_once(pg, kafka, tmp_path, monkeypatch):
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"eu": 3, "us": 2}, max_records_per_batch=70)
    sent = send(env, f"{prefix}-eu", 150) + send(env, f"{prefix}-us", 90)

    plan = plan_live_run(env.pipeline)
    assert {r.topic for r in plan.ranges} == {f"{prefix}-eu", f"{prefix}-us"}
    assert set(plan.topic_ids) == {f"{prefix}-eu", f"{prefix}-us"}, "each topic's Kafka id travels with the plan"
    env.ingest_all()

    assert landed(env) == sorted(sent)
    assert ledgers(env) == log_ends(sent)
    status = pipeline_status(env.pipeline)
    assert sorted(status.topics) == [f"{prefix}-eu", f"{prefix}-us"]
    assert [(lag.topic, lag.partition, lag.lag) for lag, _ in status.partitions] == [
        (f"{prefix}-eu", 0, 0),
        (f"{prefix}-eu", 1, 0),
        (f"{prefix}-eu", 2, 0),
        (f"{prefix}-us", 0, 0),
        (f"{prefix}-us", 1, 0),
    ]

    more = send(env, f"{prefix}-us", 30)
    status = pipeline_status(env.pipeline)
    assert sum(lag.lag for lag, _ in status.partitions if lag.topic == f"{prefix}-us") == 30
    assert sum(lag.lag for lag, _ in status.partitions if lag.topic == f"{prefix}-eu") == 0
    assert any(line.lstrip().startswith(f"{prefix}-us ") for line in status_lines(status))
    env.ingest_all()
    assert landed(env) == sorted(sent + more)


def test_a_topic_that_comes_to_match_the_pattern_mid_run_is_read_by_the_next_plan(pg, kafka, tmp_path, monkeypatch):
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"eu": 2, "us": 2}, pattern="(eu|us|apac)")
    create_topic(kafka, f"{prefix}-other", 1)  # a neighbour the pattern does not match
    send(env, f"{prefix}-other", 5)
    sent = send(env, f"{prefix}-eu", 40) + send(env, f"{prefix}-us", 40)
    env.ingest_all()

    sent += send(env, f"{prefix}-eu", 10)
    in_flight = plan_live_run(env.pipeline)
    create_topic(kafka, f"{prefix}-apac", 2)  # appears while the planned run has yet to commit
    joined = send(env, f"{prefix}-apac", 25)
    result = env.spark_job(in_flight)
    assert result.returncode == 0, result.stdout[-3000:]
    assert f"{prefix}-apac" not in {t for t, *_ in landed(env)}, "the run read what it planned, no more"

    plan_live_run(env.pipeline)  # a planning that sees the new topic but commits nothing of it
    env.ingest_all()
    assert landed(env) == sorted(sent + joined)
    notes = env.query(
        "SELECT note, ranges FROM microingest.batches WHERE pipeline = %s AND kind = 'new_topic'", (env.pipeline.name,)
    )
    assert [n for n, _ in notes] == [
        f"topic {prefix}-apac matches topic_pattern '{prefix}-(eu|us|apac)' and joins the pipeline: read from its "
        "earliest offsets (a topic that comes to match holds nothing older than the pipeline)"
    ], "recorded once, however many plans saw it before its first batch"
    assert sorted((r["partition"], r["from"]) for r in notes[0][1]) == [(0, 0), (1, 0)]
    assert not [k for k in ledgers(env) if k[0] == f"{prefix}-other"]

    admin = KafkaAdminClient(**kafka)
    admin.delete_topics([f"{prefix}-us"])
    admin.close()
    kept = {k: v for k, v in ledgers(env).items() if k[0] == f"{prefix}-us"}
    sent_after = send(env, f"{prefix}-eu", 7)
    env.ingest_all()
    assert landed(env) == sorted(sent + joined + sent_after)
    assert {k: v for k, v in ledgers(env).items() if k[0] == f"{prefix}-us"} == kept, "positions never dropped"
    status = pipeline_status(env.pipeline)
    assert status.gone == (f"{prefix}-us",)
    assert any(f"GONE: topic {prefix}-us" in line for line in status_lines(status))


def test_backfills_skips_and_redrives_name_their_topic(pg, kafka, tmp_path, monkeypatch):
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"eu": 1, "us": 1}, dead_letter={"max_fraction": 0.5})
    eu, us = f"{prefix}-eu", f"{prefix}-us"
    sent = send(env, eu, 20) + send(env, us, 20)
    env.ingest_all()

    with pytest.raises(RequestError, match=f"say which of {eu}, {us}"):
        plan_backfill(env.pipeline, parse_request({"backfill_ranges": {"0": [0, 5]}}))
    with pytest.raises(RequestError, match=r"reads .* not nowhere"):
        plan_backfill(env.pipeline, parse_request({"backfill_ranges": {"0": [0, 5]}, "topic": "nowhere"}))
    plan = plan_backfill(
        env.pipeline, parse_request({"backfill_ranges": {"0": [5, 15]}, "topic": us, "overlap": "replace"})
    )
    assert [(r.topic, r.partition, r.from_offset, r.until_offset) for r in plan.ranges] == [(us, 0, 5, 15)]
    result = env.spark_job(plan)
    assert result.returncode == 0, result.stdout[-3000:]
    assert landed(env) == sorted(sent), "the replayed positions replaced, nothing doubled, the other topic untouched"

    skipped = send(env, us, 3)
    kept = send(env, eu, 3)
    result = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, skipped[-1][2] + 1, "incident", us), "on-call"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert env.query(
        'SELECT topic, partition, "offset" FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 3',
        (env.pipeline.name,),
    ) == [(t, p, o) for t, p, o, _ in skipped]
    produce(env.kafka, eu, [(b"bad", b"{not json")])
    env.ingest_all()
    assert landed(env) == sorted(sent + kept)

    # Redrives take one topic's dead letters, or every topic's; a partition needs its topic.
    everything, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    assert {r.topic for r in everything.ranges} == {eu, us}
    with pytest.raises(RequestError, match=f"say which of {eu}, {us}"):
        plan_redrive(env.pipeline, RedriveRequest(partition=0), "on-call")
    plan, groups = plan_redrive(env.pipeline, RedriveRequest(topic=us), "on-call")
    assert [(g.topic, g.error_class, g.records) for g in groups] == [(us, "skipped", 3)]
    result = env.spark_job(plan)
    assert result.returncode == 0, result.stdout[-3000:]
    assert landed(env) == sorted(sent + kept + skipped), "the skipped records of one topic redriven, once"
    unresolved = "SELECT topic, error_class FROM microingest.dead_letters WHERE pipeline = %s AND resolved_by IS NULL"
    assert env.query(unresolved, (env.pipeline.name,)) == [(eu, "invalid_json")]


def test_a_key_carried_by_two_topics_ends_on_its_newest_record_whatever_the_offsets(pg, kafka, tmp_path, monkeypatch):
    """upsert_latest across topics: the offsets of two topics say nothing of each other's order, the Kafka timestamp
    does. Key k's newer record sits at offset 0 of one topic, its older one at offset 3 of the other."""
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"eu": 1, "us": 1}, sink_mode="upsert_latest")
    env.replace_target(UPSERT_TARGET)
    eu, us = f"{prefix}-eu", f"{prefix}-us"

    base = int(time.time() * 1000) - 60_000  # a minute ago: the broker deletes records older than its retention

    def event(key: str, event_id: str, at_ms: int):
        return [(key.encode(), json_bytes({"event_id": event_id, "event_time": 1}))], lambda i: base + at_ms

    for topic, key, event_id, at in [
        (eu, "filler", "f1", 1_000),
        (eu, "filler", "f2", 1_001),
        (eu, "filler", "f3", 1_002),
        (eu, "k", "older", 2_000),  # eu[0]@3
        (us, "k", "newer", 3_000),  # us[0]@0
        (us, "gone", "gone-us", 1_000),
        (eu, "gone", "gone-eu", 500),  # eu[0]@4: the highest offset, the oldest record
    ]:
        records, stamp = event(key, event_id, at)
        produce(env.kafka, topic, records, timestamp_of=stamp)
    produce(env.kafka, us, [(b"gone", None)], timestamp_of=lambda i: base + 4_000)  # a tombstone newer than both
    env.ingest_all()

    rows = env.query(sql.SQL("SELECT record_key, event_id, source_topic FROM {} ORDER BY 1").format(env.table))
    assert rows == [("filler", "f3", eu), ("k", "newer", us)]


def test_a_latest_pipeline_reads_a_topic_that_comes_to_match_from_its_start(pg, kafka, tmp_path, monkeypatch):
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"eu": 1}, pattern="(eu|us)", start_from="latest")
    send(env, f"{prefix}-eu", 10)  # before the pipeline's start: never read
    assert env.ingest_all() == []
    later = send(env, f"{prefix}-eu", 5)
    create_topic(kafka, f"{prefix}-us", 1)
    joined = send(env, f"{prefix}-us", 8)  # written before any plan saw the topic
    env.ingest_all()
    assert landed(env) == sorted(later + joined)
    [note] = env.query(
        "SELECT note FROM microingest.batches WHERE pipeline = %s AND kind = 'new_topic'", (env.pipeline.name,)
    )
    assert note[0].startswith(f"topic {prefix}-us matches topic_pattern") and "read from its earliest" in note[0]


def test_a_pattern_that_matched_nothing_at_its_first_plan_reads_the_first_topic_to_match_from_earliest(
    pg, kafka, tmp_path, monkeypatch
):
    """Deployed before any topic matches (start_from: latest): the topic that comes to match joins the pipeline and
    is read from its earliest offsets, as the docs promise; a pipeline whose first plan finds the topic there starts
    at its end, as start_from says."""
    env, prefix = several(pg, kafka, tmp_path, monkeypatch, {"other": 1}, pattern="eu", start_from="latest")
    assert plan_live_run(env.pipeline).ranges == ()
    create_topic(kafka, f"{prefix}-eu", 2)
    sent = send(env, f"{prefix}-eu", 25)

    env.ingest_all()

    assert landed(env) == sorted(sent)
    history = env.query(
        "SELECT kind, note FROM microingest.batches WHERE pipeline = %s AND kind IN ('waiting', 'new_topic') "
        "ORDER BY committed_at",
        (env.pipeline.name,),
    )
    assert [kind for kind, _ in history] == ["waiting", "new_topic"]
    assert "matches no topic yet" in history[0][1] and "read from its earliest offsets" in history[1][1]

    late = new_env(
        pg,
        kafka,
        env.pipelines_dir,
        f"{env.pipeline.name}_late",
        f"{prefix}-other",
        topic_pattern=f"{prefix}-eu",
        start_from="latest",
    )
    late.ingest_all()
    assert landed(late) == [], "the first plan that sees the topic places it by start_from"
    more = send(env, f"{prefix}-eu", 5)
    late.ingest_all()
    assert landed(late) == sorted(more)
