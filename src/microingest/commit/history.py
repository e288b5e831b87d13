"""The batch history (microingest.batches): one row per committed batch, written in the batch's own transaction.

It records what each batch read and wrote and which DAG run made it, so a retried run can tell what it already
committed (`committed_by_run`) and finish with that outcome instead of redoing or being fenced by its own work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from microingest.plan.offsets import OffsetRange


@dataclass(frozen=True)
class RunInfo:
    """Who asked for the batch (the DAG run and task try) and which Spark application ran it; recorded in the
    history row. What kind of batch it is comes from the plan, not from here."""

    dag_id: str | None = None
    run_id: str | None = None
    task_try: int | None = None
    clear_number: int = 0  # how often the DAG run was cleared (Airflow's dag_run.clear_number)
    spark_app_id: str | None = field(default=None, kw_only=True)  # set by the job once its session is up

    def to_dict(self) -> dict:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_try": self.task_try,
            "clear_number": self.clear_number,
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> RunInfo:
        return cls(**(d or {}))


@dataclass(frozen=True)
class BatchRecord:
    """What one batch did, as the history keeps it."""

    kind: str  # ingest | backfill (a run's batches, from its plan) | pin | skip | restart (a recreated topic)
    records_read: int
    rows_written: int
    dead_letters: int
    started_at: datetime
    staged_at: datetime | None = None  # when the driver held the whole batch decoded (named before it was)
    run_batch: int | None = None  # 1, 2, ... within its DAG run
    note: str | None = None  # who made an operator's batch (a skip) and why; what a backfill resolved


def record_batch(
    cur, pipeline: str, batch_id: str, ranges: Sequence[OffsetRange], run: RunInfo, record: BatchRecord
) -> None:
    cur.execute(
        "INSERT INTO microingest.batches (batch_id, pipeline, kind, ranges, records_read, rows_written, dead_letters, "
        "gaps, started_at, staged_at, dag_id, run_id, task_try, clear_number, spark_app_id, run_batch, note, "
        "committed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp())",
        (
            batch_id,
            pipeline,
            record.kind,
            json.dumps([r.to_dict() for r in ranges]),
            record.records_read,
            record.rows_written,
            record.dead_letters,
            _gaps_json(ranges),
            record.started_at,
            record.staged_at,
            run.dag_id,
            run.run_id,
            run.task_try,
            run.clear_number,
            run.spark_app_id,
            record.run_batch,
            record.note,
        ),
    )


def _gaps_json(ranges: Sequence[OffsetRange]) -> str | None:
    """Offsets lost to retention that this batch skips (on_retention_gap: skip): audited, never silent."""
    gaps = [{"topic": r.topic, "partition": r.partition, "from": r.gap[0], "until": r.gap[1]} for r in ranges if r.gap]
    return json.dumps(gaps) if gaps else None


@dataclass(frozen=True)
class CommitResult:
    """What one committed batch did."""

    batch_id: str
    rows_written: int
    records_read: int
    dead_letters: int
    ranges: tuple[OffsetRange, ...]
    skipped: int = 0  # backfill, overlap skip_existing: records whose positions were already there


@dataclass
class RunOutcome:
    """What one DAG run has committed (over all its task tries): what the job reports, what the ingest task returns
    as XCom, and what a retry starts from."""

    batches: int = 0
    records_read: int = 0
    rows_written: int = 0
    dead_letters: int = 0
    skipped: int = 0  # backfill, overlap skip_existing: records whose positions were already there
    remaining: int = 0  # records of the run's plan left for the next run (time budget spent)
    ranges: tuple[OffsetRange, ...] = ()  # what was committed, so a retry can leave it out of its plan

    def add(self, batch: CommitResult) -> None:
        self.extend(
            RunOutcome(
                1, batch.records_read, batch.rows_written, batch.dead_letters, batch.skipped, ranges=batch.ranges
            )
        )

    def extend(self, earlier: RunOutcome) -> None:
        """Count in what earlier tries of the run committed."""
        self.batches += earlier.batches
        self.records_read += earlier.records_read
        self.rows_written += earlier.rows_written
        self.dead_letters += earlier.dead_letters
        self.skipped += earlier.skipped
        self.ranges += earlier.ranges

    def to_dict(self) -> dict:
        """The committed outcome as the job reports it and the ingest task returns it (ranges stay out: XCom is for
        people and later tasks, the history holds them)."""
        return {
            "status": "committed",
            "batches": self.batches,
            "records_read": self.records_read,
            "rows_written": self.rows_written,
            "dead_letters": self.dead_letters,
            "skipped": self.skipped,
            "remaining": self.remaining,
        }


def committed_by_run(conn, pipeline: str, run: RunInfo, kind: str) -> RunOutcome:
    """The batches of `kind` that earlier tries of this DAG run committed.

    A backfill's earlier tries are those since the run was last cleared: an operator clears a finished backfill run
    to replay it (after fixing a transform, with overlap replace, say), so the batches of an earlier clearing are
    history, not progress. A live run's batches count whenever they were made: its plan starts at the ledger, and a
    cleared live run has nothing of its own to read twice."""
    outcome = RunOutcome()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT batch_id::text, rows_written, records_read, dead_letters, ranges FROM microingest.batches "
            "WHERE pipeline = %s AND dag_id = %s AND run_id = %s AND kind = %s AND (kind <> 'backfill' OR "
            "clear_number = %s)",
            (pipeline, run.dag_id, run.run_id, kind, run.clear_number),
        )
        for batch_id, written, read, dead, ranges in cur.fetchall():
            outcome.add(CommitResult(batch_id, written, read, dead, tuple(map(OffsetRange.from_dict, ranges))))
    return outcome


@dataclass(frozen=True)
class CommittedBatch:
    """One history row of a run, as what comes after the commit (announcements, notes, lineage) reads it."""

    batch_id: str
    kind: str
    run_batch: int | None
    ranges: tuple[OffsetRange, ...]
    records_read: int
    rows_written: int
    dead_letters: int
    started_at: datetime
    committed_at: datetime


def restarts_of_run(conn, pipeline: str, dag_id: str, run_id: str) -> list[str]:
    """The notes of the topic restarts (a topic deleted and created again) that one DAG run's planning recorded."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT note FROM microingest.batches WHERE pipeline = %s AND dag_id = %s AND run_id = %s AND "
            "kind = 'restart' ORDER BY committed_at",
            (pipeline, dag_id, run_id),
        )
        return [note for (note,) in cur.fetchall()]


def batches_of_run(conn, pipeline: str, dag_id: str, run_id: str) -> list[CommittedBatch]:
    """The ingest, backfill and skip batches one DAG run committed over all its tries, in commit order."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT batch_id::text, kind, run_batch, ranges, records_read, rows_written, dead_letters, "
            "started_at, committed_at FROM microingest.batches WHERE pipeline = %s AND dag_id = %s "
            "AND run_id = %s AND kind IN ('ingest', 'backfill', 'skip') ORDER BY committed_at, run_batch",
            (pipeline, dag_id, run_id),
        )
        return [
            CommittedBatch(
                batch_id,
                kind,
                run_batch,
                tuple(map(OffsetRange.from_dict, ranges)),
                read,
                written,
                dead,
                started,
                committed,
            )
            for batch_id, kind, run_batch, ranges, read, written, dead, started, committed in cur.fetchall()
        ]
