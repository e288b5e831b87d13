"""The batch history (microingest.batches): one row per committed batch, written in the batch's own transaction.

It records what each batch read and wrote and which DAG run made it, so a retried run can tell what it already
committed (`committed_by_run`) and finish with that outcome instead of redoing or being fenced by its own work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from microingest.batches import CommitResult, CommittedBatch, OffsetRange, RunInfo, RunOutcome


@dataclass(frozen=True)
class BatchRecord:
    """What one batch did, as the history keeps it."""

    # ingest | backfill | redrive (a run's batches, from its plan) | pin | skip | restart (a recreated topic) |
    # new_topic (a topic the pipeline starts reading after its first) | waiting (a pattern that matched nothing yet)
    kind: str
    records_read: int
    rows_written: int
    dead_letters: int
    started_at: datetime
    staged_at: datetime | None = None  # when the driver held the whole batch decoded (named before it was)
    run_batch: int | None = None  # 1, 2, ... within its DAG run
    note: str | None = None  # who made an operator's batch (a skip) and why; what a backfill resolved
    filtered: int = 0  # records the pipeline's transform_sql filtered out
    decoded_in_jvm: int | None = None  # records the JVM's strict decoder read; None: a batch that decodes nothing


def record_batch(
    cur, pipeline: str, batch_id: str, ranges: Sequence[OffsetRange], run: RunInfo, record: BatchRecord
) -> None:
    cur.execute(
        "INSERT INTO microingest.batches (batch_id, pipeline, kind, ranges, records_read, rows_written, dead_letters, "
        "gaps, started_at, staged_at, dag_id, run_id, task_try, clear_number, spark_app_id, run_batch, note, "
        "filtered, decoded_in_jvm, committed_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, clock_timestamp())",
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
            record.filtered,
            record.decoded_in_jvm,
        ),
    )


def _gaps_json(ranges: Sequence[OffsetRange]) -> str | None:
    """Offsets lost to retention that this batch skips (on_retention_gap: skip): audited, never silent."""
    gaps = [{"topic": r.topic, "partition": r.partition, "from": r.gap[0], "until": r.gap[1]} for r in ranges if r.gap]
    return json.dumps(gaps) if gaps else None


def committed_by_run(conn, pipeline: str, run: RunInfo, kind: str) -> RunOutcome:
    """The batches of `kind` that earlier tries of this DAG run committed.

    A backfill's earlier tries are those since the run was last cleared: an operator clears a finished backfill run
    to replay it (after fixing a transform, with overlap replace, say), so the batches of an earlier clearing are
    history, not progress; so for a redrive, whose clearing tries again the dead letters still failing. A live
    run's batches count whenever they were made: its plan starts at the ledger, and a
    cleared live run has nothing of its own to read twice."""
    outcome = RunOutcome()
    with conn.cursor() as cur:
        cur.execute(
            "SELECT batch_id::text, rows_written, records_read, dead_letters, ranges FROM microingest.batches "
            "WHERE pipeline = %s AND dag_id = %s AND run_id = %s AND kind = %s AND (kind NOT IN ('backfill', "
            "'redrive') OR clear_number = %s)",
            (pipeline, run.dag_id, run.run_id, kind, run.clear_number),
        )
        for batch_id, written, read, dead, ranges in cur.fetchall():
            outcome.add(CommitResult(batch_id, written, read, dead, tuple(map(OffsetRange.from_dict, ranges))))
    return outcome


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
    """The ingest, backfill, skip and redrive batches one DAG run committed over all its tries, in commit order."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT batch_id::text, kind, run_batch, ranges, records_read, rows_written, dead_letters, "
            "started_at, committed_at FROM microingest.batches WHERE pipeline = %s AND dag_id = %s "
            "AND run_id = %s AND kind IN ('ingest', 'backfill', 'skip', 'redrive') ORDER BY committed_at, run_batch",
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
