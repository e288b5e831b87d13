"""The batch history (microingest.batches): one row per committed batch, written in the batch's own transaction.

It records what each batch read and wrote and which DAG run made it, so a retried run can tell what it already
committed (`committed_by_run`) and finish with that outcome instead of redoing or being fenced by its own work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from microingest.plan.offsets import OffsetRange


@dataclass(frozen=True)
class RunInfo:
    """Who asked for the batch; recorded in the history row."""

    dag_id: str | None = None
    run_id: str | None = None
    task_try: int | None = None
    kind: str = "ingest"  # ingest | backfill | pin | skip

    def to_dict(self) -> dict:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_try": self.task_try, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict | None) -> "RunInfo":
        return cls(**(d or {}))


@dataclass(frozen=True)
class BatchRecord:
    """What one batch did, as the history keeps it."""

    records_read: int
    rows_written: int
    dead_letters: int
    started_at: datetime
    staged_at: datetime | None = None
    spark_app_id: str | None = None
    run_batch: int | None = None  # 1, 2, ... within its DAG run
    note: str | None = None  # who made an operator's batch (a skip) and why


def record_batch(cur, pipeline: str, batch_id: str, ranges: Sequence[OffsetRange], run: RunInfo,
                 record: BatchRecord) -> None:
    cur.execute(
        "INSERT INTO microingest.batches (batch_id, pipeline, kind, ranges, records_read, rows_written, dead_letters, "
        "gaps, started_at, staged_at, dag_id, run_id, task_try, spark_app_id, run_batch, note, committed_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp())",
        (batch_id, pipeline, run.kind, json.dumps([r.to_dict() for r in ranges]), record.records_read,
         record.rows_written, record.dead_letters, _gaps_json(ranges), record.started_at, record.staged_at,
         run.dag_id, run.run_id, run.task_try, record.spark_app_id, record.run_batch, record.note))


def _gaps_json(ranges: Sequence[OffsetRange]) -> str | None:
    """Offsets lost to retention that this batch skips (on_retention_gap: skip): audited, never silent."""
    gaps = [{"topic": r.topic, "partition": r.partition, "from": r.gap[0], "until": r.gap[1]} for r in ranges if r.gap]
    return json.dumps(gaps) if gaps else None


@dataclass(frozen=True)
class RunSoFar:
    """The batches one DAG run has committed (over all its task tries)."""

    batches: int
    records_read: int
    rows_written: int
    dead_letters: int
    ranges: tuple[OffsetRange, ...]


def committed_by_run(conn, pipeline: str, dag_id: str, run_id: str, kind: str) -> RunSoFar:
    with conn.cursor() as cur:
        cur.execute("SELECT ranges, records_read, rows_written, dead_letters FROM microingest.batches "
                    "WHERE pipeline = %s AND dag_id = %s AND run_id = %s AND kind = %s", (pipeline, dag_id, run_id, kind))
        rows = cur.fetchall()
    return RunSoFar(len(rows), sum(r[1] for r in rows), sum(r[2] for r in rows), sum(r[3] for r in rows),
                    tuple(OffsetRange.from_dict(d) for r in rows for d in r[0]))
