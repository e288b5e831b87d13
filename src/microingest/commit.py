"""The one transaction that lands a batch: fence, publish staged rows and dead letters, record history, clean staging.

Live batches (kind ingest) fence on the ledger (it must still hold each range's planned start) and advance it.
Backfill batches fence below the ledger (their ranges must end at or below each partition's live position), leave
it alone, and settle positions already present in the target by the run's overlap policy (`overlap`).
A crash anywhere before COMMIT leaves target, ledger and history untouched.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from psycopg2 import sql

from microingest import faults
from microingest.history import BatchRecord, RunInfo, record_batch
from microingest.ledger import LedgerError, fence_and_advance, fence_below
from microingest.overlap import settle_overlap
from microingest.planning import OffsetRange
from microingest.staging import DEAD_LETTER_COLUMNS, STAGED_DEAD, BatchAttempt, StagedCounts, delete_staged

log = logging.getLogger(__name__)


class StagingMismatchError(LedgerError):
    pass


@dataclass(frozen=True)
class CommitResult:
    batch_id: str
    rows_written: int
    records_read: int
    dead_letters: int
    ranges: tuple[OffsetRange, ...]
    skipped: int = 0  # backfill, overlap skip_existing: records whose positions were already there


def commit_batch(attempt: BatchAttempt, ranges: Sequence[OffsetRange], staged: StagedCounts, run: RunInfo, *,
                 overlap: str = "refuse", staged_at: datetime | None = None, spark_app_id: str | None = None,
                 run_batch: int | None = None) -> CommitResult:
    pipeline, sink, batch_id = attempt.pipeline, attempt.sink, attempt.batch_id
    conn = attempt.conn
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            if run.kind == "backfill":
                fence_below(cur, pipeline.name, ranges, batch_id)
            else:
                fence_and_advance(cur, pipeline.name, ranges, batch_id)
            found = attempt.staged(cur)
            if found != staged:
                raise StagingMismatchError(
                    f"batch {batch_id}: executors reported {staged.rows} rows and {staged.dead} dead letters "
                    f"but {found.rows} and {found.dead} are staged; nothing was committed")
            kept = settle_overlap(cur, sink, batch_id, ranges, overlap) if run.kind == "backfill" else staged
            written = sink.publish(cur, batch_id)
            columns = sql.SQL(", ").join(map(sql.Identifier, DEAD_LETTER_COLUMNS))
            cur.execute(sql.SQL("INSERT INTO microingest.dead_letters (pipeline, {}) SELECT %s, {} FROM {} "
                                "WHERE batch_id = %s").format(columns, columns, STAGED_DEAD), (pipeline.name, batch_id))
            record_batch(cur, pipeline.name, batch_id, ranges, run,
                         BatchRecord(staged.records, written, kept.dead, attempt.started_at, staged_at, spark_app_id,
                                     run_batch))
            delete_staged(cur, sink.staging, batch_id)
        faults.crash_point("before_commit")
        conn.commit()
    except BaseException:
        if not conn.closed:  # after a lost connection the server has rolled back already; keep the real error
            conn.rollback()
        raise
    finally:
        if not conn.closed:
            conn.autocommit = True
    return CommitResult(batch_id, written, staged.records, kept.dead, tuple(ranges), staged.records - kept.records)
