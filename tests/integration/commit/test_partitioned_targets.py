"""A partitioned target on the real platform (Kafka, Spark, Postgres): a month of event times lands once each, each
day's rows in that day's partition, made by the batch that needed it; retention drops the old days (audited); a
backfill into a dropped day brings it back, and the next retention pass drops it again."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from psycopg2 import sql

from helpers.pipeline_env import DEMO_SCHEMA
from microingest.batches import RunInfo
from microingest.commit.target_tables import prepare_targets
from microingest.plan.backfill import plan_backfill
from microingest.plan.request import parse_request
from microingest.systems.kafka_access import json_bytes

DAYS, PER_DAY, RETAIN_DAYS = 31, 7, 30


def partitions(env) -> dict[str, int]:
    """Each partition of the target (the default one too) and the rows it holds."""
    return dict(
        env.query(
            sql.SQL(
                "SELECT c.relname, (SELECT count(*) FROM {} t WHERE t.tableoid = c.oid) FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = %s::regclass ORDER BY 1"
            ).format(env.table),
            (env.pipeline.target_table,),
        )
    )


def changes(env, change: str) -> list[str]:
    return [
        name
        for (name,) in env.query(
            "SELECT column_name FROM microingest.schema_changes WHERE pipeline = %s AND change = %s ORDER BY id",
            (env.pipeline.name, change),
        )
    ]


def prepared(env) -> str:
    [result] = prepare_targets([env.pipeline], "test")
    assert not isinstance(result, Exception), result
    return result.summary()


def test_a_month_of_event_times_lands_in_daily_partitions_and_retention_drops_the_old_ones(env):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(
        schema={**DEMO_SCHEMA, "event_time": {"type": "timestamp", "required": True}},
        partition_by={"field": "event_time", "interval": "1 day", "retain": f"{RETAIN_DAYS} days"},
    )
    prepared(env)
    assert partitions(env) == {f"{env.pipeline.name}_default": 0}

    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    first = today - timedelta(days=DAYS + 9)  # the month ends 10 days ago: the oldest days are past retention
    days = [first + timedelta(days=d) for d in range(DAYS)]
    records = []
    for day in days:
        for k in range(PER_DAY):  # spread over the day, its first and last microsecond included
            at = day + (timedelta(days=1) - timedelta(microseconds=1)) * k / (PER_DAY - 1)
            records.append((f"{day:%m%d}-{k}".encode(), at))
    positions = env.send(
        [(key, json_bytes({"event_id": key.decode(), "event_time": at.isoformat()})) for key, at in records]
    )
    env.ingest_all()
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(positions)
    name = env.pipeline.name
    by_day = {f"{name}_p{day:%Y%m%d}": PER_DAY for day in days}
    assert partitions(env) == {**by_day, f"{name}_default": 0}
    assert sorted(changes(env, "partition_created")) == sorted(by_day)
    # each row in the partition of its own day
    assert env.query(
        sql.SQL(
            "SELECT count(*) FROM {} WHERE tableoid::regclass::text <> %s || to_char(event_time AT TIME ZONE 'UTC', "
            "'YYYYMMDD')"
        ).format(env.table),
        (f"{name}_p",),
    ) == [(0,)]

    horizon = datetime.now(timezone.utc) - timedelta(days=RETAIN_DAYS)
    old = sorted(f"{name}_p{day:%Y%m%d}" for day in days if day + timedelta(days=1) <= horizon)
    assert old, "some days must be past retention"
    summary = prepared(env)
    assert f"dropped {len(old)} partition(s) past retention" in summary
    assert changes(env, "partition_dropped") == old
    kept = {part: rows for part, rows in by_day.items() if part not in old}
    assert partitions(env) == {**kept, f"{name}_default": 0}

    # A backfill over the whole month: the dropped days come back (their rows with them), the kept ones are settled
    # by the overlap policy, nothing lands twice; the next retention pass drops the old days again.
    ranges = {}
    for p, o in positions:
        lo, hi = ranges.get(str(p), (o, o + 1))
        ranges[str(p)] = [min(lo, o), max(hi, o + 1)]
    plan = plan_backfill(env.pipeline, parse_request({"backfill_ranges": ranges, "overlap": "skip_existing"}, "manual"))
    result = env.spark_job(plan, run=RunInfo(dag_id=env.pipeline.dag_id, run_id="manual__refill"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert partitions(env) == {**by_day, f"{name}_default": 0}
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(positions)
    prepared(env)
    assert partitions(env) == {**kept, f"{name}_default": 0}
    assert changes(env, "partition_dropped") == old + old


def test_a_target_partitioned_by_a_column_named_like_a_keyword_is_recognized_as_it_was_made(env):
    """Postgres quotes such a column in its own rendering of the partition key; the comparison reads the name."""
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(
        schema={"event_id": {"type": "string", "required": True}, "timestamp": {"type": "timestamp", "required": True}},
        partition_by={"field": "timestamp", "interval": "1 month"},
    )
    assert "created" in prepared(env)
    assert prepared(env).endswith("matches the declaration")
    env.send([(b"k", json_bytes({"event_id": "e", "timestamp": "0001-01-01T00:00:00Z"}))])
    env.ingest_all()
    assert partitions(env) == {f"{env.pipeline.name}_p000101": 1, f"{env.pipeline.name}_default": 0}
