"""The one transaction that lands a batch: fence, publish staged rows and dead letters, record history, clean staging.

Live batches (kind ingest) fence on the ledger (it must still hold each range's planned start) and advance it.
Backfill batches fence below the ledger (their ranges must end at or below each partition's live position), leave
it alone, and settle positions already present in the target by the run's overlap policy (`overlap`).
A crash anywhere before COMMIT leaves target, ledger and history untouched.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Sequence

import psycopg2
from psycopg2 import sql
from psycopg2.errors import LockNotAvailable, QueryCanceled

from microingest import faults, settings
from microingest.commit.history import BatchRecord, CommitResult, RunInfo, record_batch
from microingest.commit.ledger import LedgerError, fence_and_advance, fence_below
from microingest.commit.overlap import settle_overlap
from microingest.commit.staging import DEAD_LETTER_COLUMNS, STAGED_DEAD, BatchAttempt, StagedCounts, delete_staged
from microingest.commit.target_tables import TargetError
from microingest.declare.identifiers import identifier_list
from microingest.errors import Transient
from microingest.plan.offsets import Batch, OffsetRange

log = logging.getLogger(__name__)


class StagingMismatchError(LedgerError):
    """Staging holds records the plan did not ask for: the read did not match the plan, and would not on a retry."""


class StagingLostError(Transient):
    """Staging holds fewer records than the executors staged. Staging is UNLOGGED: a Postgres crash empties it, and
    a failover to a replica finds it empty. Nothing was committed; a retry stages the batch again."""


class CommitTimeoutError(Transient):
    """The commit waited longer than allowed (a held lock, a hung statement); nothing was written. Worth a retry."""


def _bound_transaction(cur) -> None:
    """READ COMMITTED whatever the server's default: the fences lock the ledger rows and then read them as they are
    (stricter levels would fail a commit that merely waited for another). Bounded waits, so a stuck lock or a hung
    statement fails the batch (and Airflow retries it) instead of holding a worker forever."""
    cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    cur.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                (f"{settings.commit_lock_timeout_ms()}ms", f"{settings.commit_statement_timeout_ms()}ms"))


def prove_staging(cur, attempt: BatchAttempt, ranges: Sequence[OffsetRange], reported: StagedCounts) -> None:
    """What the commit checks before publishing: staging holds exactly what the executors reported (nothing lost
    or left over from elsewhere), every staged record lies inside a planned range, and no range yields more records
    than it has offsets (fewer is normal: transaction markers and aborted records take offsets too)."""
    found = attempt.staged_by_range(cur, ranges)
    if found.counts.rows <= reported.rows and found.counts.dead <= reported.dead and found.counts != reported:
        raise StagingLostError(
            f"batch {attempt.batch_id}: executors staged {reported.rows} rows and {reported.dead} dead letters but "
            f"only {found.counts.rows} and {found.counts.dead} are left (unlogged staging does not survive a Postgres "
            "crash or failover); nothing was committed, a retry stages the batch again")
    if found.counts != reported:
        raise StagingMismatchError(
            f"batch {attempt.batch_id}: executors reported {reported.rows} rows and {reported.dead} dead letters but "
            f"{found.counts.rows} and {found.counts.dead} are staged; nothing was committed")
    if found.outside:
        raise StagingMismatchError(
            f"batch {attempt.batch_id}: {found.outside} staged record(s) lie outside the planned ranges (e.g. "
            f"{found.example_outside}); the read did not match the plan, nothing was committed")
    over = [f"{r} yields {n} records for {r.size} offsets" for r, n in zip(ranges, found.per_range) if n > r.size]
    if over:
        raise StagingMismatchError(f"batch {attempt.batch_id}: {'; '.join(over)}; nothing was committed")


def _publish(cur, sink, batch: Batch, batch_id: str) -> int:
    """The staged rows into the target. A row the target's own constraints or types refuse (a CHECK, a NOT NULL, a
    unique index, a value too long, a foreign key) is refused again by a retry of the same batch: a TargetError, not
    a transient failure."""
    try:
        return sink.publish(cur, batch_id)
    except (psycopg2.IntegrityError, psycopg2.DataError) as exc:
        # The first line names the constraint (for a type error, the value); DETAIL, quoting whole rows, stays out.
        reason = str(exc).strip().splitlines()[0]
        raise TargetError(
            f"batch {batch_id} of pipeline '{sink.pipeline.name}' ({', '.join(map(str, batch.ranges))}): the target "
            f"refused the rows ({reason}); nothing was committed. A retry meets the same rows: change the table or "
            "the pipeline's transform, or skip the records (microingest skip)") from None


def commit_batch(attempt: BatchAttempt, batch: Batch, staged: StagedCounts, run: RunInfo,
                 staged_at: datetime | None = None) -> CommitResult:
    pipeline, sink, batch_id, ranges = attempt.pipeline, attempt.sink, attempt.batch_id, batch.ranges
    conn = attempt.conn
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            _bound_transaction(cur)
            if batch.is_backfill:
                fence_below(cur, pipeline.name, ranges, batch_id)
            else:
                fence_and_advance(cur, pipeline.name, ranges, batch_id)
            prove_staging(cur, attempt, ranges, staged)
            kept = settle_overlap(cur, sink, batch_id, ranges, batch.overlap) if batch.is_backfill else staged
            written = _publish(cur, sink, batch, batch_id)
            columns = identifier_list(DEAD_LETTER_COLUMNS)
            cur.execute(sql.SQL("INSERT INTO microingest.dead_letters (pipeline, {}) SELECT %s, {} FROM {} "
                                "WHERE batch_id = %s").format(columns, columns, STAGED_DEAD), (pipeline.name, batch_id))
            delete_staged(cur, sink.staging, batch_id)
            # Last before COMMIT, so the history's committed_at is when the publish really ended.
            record_batch(cur, pipeline.name, batch_id, ranges, run,
                         BatchRecord(batch.kind, staged.records, written, kept.dead, attempt.started_at, staged_at,
                                     batch.number))
        faults.crash_point("before_commit")
        conn.commit()
    except (LockNotAvailable, QueryCanceled) as exc:
        conn.rollback()
        waited = "the pipeline lock" if isinstance(exc, LockNotAvailable) else "a statement"
        raise CommitTimeoutError(
            f"batch {batch_id} of pipeline '{pipeline.name}': gave up waiting for {waited} ({str(exc).strip()}; "
            "MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS / _STATEMENT_TIMEOUT_SECONDS); nothing was committed, a retry "
            "goes on from here") from None
    except BaseException:
        if not conn.closed:  # after a lost connection the server has rolled back already; keep the real error
            conn.rollback()
        raise
    finally:
        if not conn.closed:
            conn.autocommit = True
    return CommitResult(batch_id, written, staged.records, kept.dead, tuple(ranges), staged.records - kept.records)
