"""A partitioned target's partitions, made and dropped on its declaration's behalf (the arithmetic is in
`partition_ranges`), each change recorded in microingest.schema_changes.

- A batch makes the partitions its rows need inside its own transaction, before it publishes them: from the hours
  its staged rows' times fall in, so a row never waits for a partition and none is made for a batch that rolls back.
  The table's DEFAULT partition (made with it) holds whatever no partition does, so no time can fail a batch.
- Retention drops, when the declaration says `retain`, each partition whose whole range is older than that: run
  where targets are prepared (a run's planning, `microingest migrate`, `make up`).
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from psycopg2 import sql

from microingest.commit.partition_ranges import Range, expired, needed, partition_name
from microingest.commit.schema_changes import record_change
from microingest.declare.identifiers import split_table_name
from microingest.declare.pipeline import PartitionBy, Pipeline
from microingest.declare.time_intervals import Interval, retention

_BOUNDS = re.compile(r"FOR VALUES FROM \('([^']+)'\) TO \('([^']+)'\)")


def partitioning(pipeline: Pipeline) -> PartitionBy:
    if pipeline.partition_by is None:
        raise ValueError(f"pipeline {pipeline.name}'s target is not partitioned")
    return pipeline.partition_by


def existing_partitions(cur, table: str) -> list[tuple[str, Range]]:
    """The table's range partitions (not its default one), by name."""
    cur.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = "
        "i.inhrelid WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
        (sql.Identifier(*split_table_name(table)).as_string(cur),),
    )
    found = []
    for name, bound in cur.fetchall():
        match = _BOUNDS.fullmatch(bound)
        if match is not None:  # DEFAULT, or bounds of MINVALUE/MAXVALUE a person made: not ours to place or drop
            found.append((name, Range(_instant(match[1]), _instant(match[2]))))
    return found


def _instant(literal: str) -> datetime:
    """A bound as pg_get_expr writes it, in the session's time zone with its offset."""
    if literal == "infinity":
        return datetime.max.replace(tzinfo=timezone.utc)
    return datetime.fromisoformat(literal)


def make_needed_partitions(cur, pipeline: Pipeline, staging: sql.Identifier, column: str, batch_id: str) -> list[str]:
    """Inside a batch's transaction, before its publish: the partitions its staged rows need; their names."""
    spec = partitioning(pipeline)
    cur.execute(
        sql.SQL("SELECT DISTINCT date_trunc('hour', {}, 'UTC') FROM {} WHERE {} IS NOT NULL").format(
            sql.Identifier(column), staging, sql.Identifier(column)
        )
    )
    hours = [row[0] for row in cur.fetchall()]
    if not hours:
        return []
    existing = existing_partitions(cur, pipeline.target_table)
    interval = Interval.parse(spec.interval)
    schema, table = split_table_name(pipeline.target_table)
    taken = [name for name, _ in existing]
    made = []
    for part in needed(hours, [r for _, r in existing], interval):
        name = partition_name(table, part, interval, taken)
        cur.execute(
            sql.SQL("CREATE TABLE {} PARTITION OF {} FOR VALUES FROM (%s) TO (%s)").format(
                sql.Identifier(schema, name), sql.Identifier(schema, table)
            ),
            (part.low, part.high),
        )
        record_change(cur, pipeline, "partition_created", name, _shown(part), f"batch {batch_id}")
        taken.append(name)
        made.append(name)
    return made


def drop_expired_partitions(cur, pipeline: Pipeline, changed_by: str, now: datetime | None = None) -> list[str]:
    """The partitions older than the declaration's `retain`, dropped with their rows; their names."""
    spec = partitioning(pipeline)
    if spec.retain is None:
        return []
    schema, _ = split_table_name(pipeline.target_table)
    now = now or datetime.now(timezone.utc)
    dropped = []
    for name, part in expired(existing_partitions(cur, pipeline.target_table), now, retention(spec.retain)):
        cur.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, name)))
        record_change(cur, pipeline, "partition_dropped", name, _shown(part), changed_by)
        dropped.append(name)
    return dropped


def _shown(part: Range) -> str:
    return f"FROM {part.low.isoformat()} TO {part.high.isoformat()}"
