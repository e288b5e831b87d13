"""The frame of the one transaction that lands a batch (`copy_commit` fills it): bounded waits, the fence, the
target's refusals, and the publish of rows staged inside it.

Live batches (kind ingest) fence on the ledger (it must still hold each range's planned start) and advance it.
Backfill batches fence below the ledger (their ranges must end at or below each partition's live position), leave
it alone, and settle positions already present in the target by the run's overlap policy (`overlap`). Redrive
batches take the pipeline's lock alone: their records are dead letters, below the ledger already (`redrive`).
A crash anywhere before COMMIT leaves target, ledger and history untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.errors import LockNotAvailable, QueryCanceled

from microingest import faults, settings
from microingest.batches import DEAD_LETTER_COLUMNS, Batch
from microingest.commit.ledger import fence_and_advance, fence_below, lock_pipeline
from microingest.commit.overlap import Position, Settled, settle_overlap
from microingest.commit.partitions import make_needed_partitions
from microingest.commit.redrive import resolve_redriven, settle_redrive
from microingest.commit.sinks import Sink, StagedCounts
from microingest.commit.target_tables import TargetError
from microingest.declare.identifiers import identifier_list
from microingest.errors import Transient

log = logging.getLogger(__name__)


class CommitTimeoutError(Transient):
    """The commit waited longer than allowed (a held lock, a hung statement); nothing was written. Worth a retry."""


def _bound_transaction(cur) -> None:
    """READ COMMITTED whatever the server's default: the fences lock the ledger rows and then read them as they are
    (stricter levels would fail a commit that merely waited for another). Bounded waits, so a stuck lock or a hung
    statement fails the batch (and Airflow retries it) instead of holding a worker forever."""
    cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
    cur.execute(
        "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
        (f"{settings.commit_lock_timeout_ms()}ms", f"{settings.commit_statement_timeout_ms()}ms"),
    )


@contextmanager
def target_refusal(sink: Sink, batch: Batch, batch_id: str) -> Iterator[None]:
    """Writing into the target. A row the target's own constraints or types refuse (a CHECK, a NOT NULL, a unique
    index, a value too long, a foreign key) is refused again by a retry of the same batch: a TargetError, not a
    transient failure."""
    try:
        yield
    except (psycopg2.IntegrityError, psycopg2.DataError) as exc:
        # The first line names the constraint (for a type error, the value); DETAIL, quoting whole rows, stays out.
        reason = str(exc).strip().splitlines()[0]
        raise TargetError(
            f"batch {batch_id} of pipeline '{sink.pipeline.name}' ({', '.join(map(str, batch.ranges))}): the target "
            f"refused the rows ({reason}); nothing was committed. A retry meets the same rows: change the table or "
            "the pipeline's transform, or skip the records (microingest skip)"
        ) from None


@contextmanager
def commit_transaction(conn, batch: Batch, pipeline: str, batch_id: str) -> Iterator[Any]:
    """The batch's one transaction, fenced: yields a cursor inside it after the fence, commits when the block ends.

    Live batches fence on the ledger and advance it; backfill batches fence below it. Waits are bounded: a lock or
    statement that takes too long is a CommitTimeoutError, with nothing committed."""
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            _bound_transaction(cur)
            if batch.is_backfill:
                fence_below(cur, pipeline, batch.ranges, batch_id, batch.topic_ids)
            elif batch.is_redrive:
                lock_pipeline(cur, pipeline)
            else:
                fence_and_advance(cur, pipeline, batch.ranges, batch_id, batch.topic_ids)
            yield cur
        faults.crash_point("before_commit")
        conn.commit()
    except (LockNotAvailable, QueryCanceled) as exc:
        conn.rollback()
        waited = "the pipeline lock" if isinstance(exc, LockNotAvailable) else "a statement"
        raise CommitTimeoutError(
            f"batch {batch_id} of pipeline '{pipeline}': gave up waiting for {waited} ({str(exc).strip()}; "
            "MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS / _STATEMENT_TIMEOUT_SECONDS); nothing was committed, a retry "
            "goes on from here"
        ) from None
    except BaseException:
        if not conn.closed:  # after a lost connection the server has rolled back already; keep the real error
            conn.rollback()
        raise
    finally:
        if not conn.closed:
            conn.autocommit = True


def publish_staged(
    cur, sink: Sink, batch: Batch, batch_id: str, staged: StagedCounts, filtered_at: Sequence[Position] = ()
) -> tuple[int, Settled]:
    """Inside the commit: settle a backfill's overlap (or what a redrive may still resolve), then move the batch's
    staged rows into the target and its staged dead letters into microingest.dead_letters (a redrive's: their
    reasons, and the resolved ones marked); returns the target rows written and what was kept."""
    if batch.is_backfill:
        kept = settle_overlap(cur, sink, batch_id, batch.ranges, batch.overlap, filtered_at)
    else:
        kept = Settled(settle_redrive(cur, sink, batch_id) if batch.is_redrive else staged, 0)
    if sink.pipeline.partition_by is not None:
        make_needed_partitions(cur, sink.pipeline, sink.staging, sink.pipeline.partition_by.field, batch_id)
    with target_refusal(sink, batch, batch_id):
        written = sink.publish(cur, batch_id)
    if batch.is_redrive:
        resolve_redriven(cur, sink, batch_id)
        return written, kept
    columns = identifier_list(DEAD_LETTER_COLUMNS)
    cur.execute(
        sql.SQL("INSERT INTO microingest.dead_letters (pipeline, {}) SELECT %s, {} FROM {} WHERE batch_id = %s").format(
            columns, columns, sink.staged_dead
        ),
        (sink.pipeline.name, batch_id),
    )
    return written, kept
