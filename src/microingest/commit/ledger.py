"""The ledger (microingest.ledger): per pipeline and partition, the next offset the live pipeline reads.

It moves only inside the transaction that publishes the records below it (`fence_and_advance`), which is what makes
live ingestion exactly-once. Backfills never move it; they must stay below it (`fence_below`), because everything
at and above a partition's position is the live pipeline's to take.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone
from typing import Any, Sequence

from microingest.commit.history import BatchRecord, RunInfo, record_batch
from microingest.errors import Refused
from microingest.plan.offsets import OffsetRange
from microingest.systems.postgres import advisory_lock, connection

log = logging.getLogger(__name__)


class LedgerError(Refused):
    """The commit protocol refused a batch; nothing of it was written."""


class FencedError(LedgerError):
    """The ledger moved since the batch was planned: another run committed (some of) these offsets."""


def read_ledger(conn, pipeline: str, topic: str) -> dict[int, int]:
    with conn.cursor() as cur:
        cur.execute("SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = %s",
                    (pipeline, topic))
        return dict(cur.fetchall())


def lock_pipeline(cur, pipeline: str) -> None:
    """Serialise the commits of one pipeline (live batches, backfill batches, pins) for the rest of the transaction."""
    advisory_lock(cur, f"microingest:pipeline:{pipeline}", transaction=True)


def _locked_positions(cur, pipeline: str, ranges: Sequence[OffsetRange]) -> dict[tuple[str, int], int]:
    lock_pipeline(cur, pipeline)
    cur.execute("SELECT topic, partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = ANY(%s) "
                "FOR UPDATE", (pipeline, sorted({r.topic for r in ranges})))
    return {(t, p): o for t, p, o in cur.fetchall()}


def fence_and_advance(cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str) -> None:
    """Inside the commit transaction: verify every range's planned start, then move the ledger to its end."""
    current = _locked_positions(cur, pipeline, ranges)
    stale = [(r, current.get((r.topic, r.partition))) for r in ranges
             if current.get((r.topic, r.partition)) != r.ledger_offset]
    if stale:
        detail = "; ".join(
            f"{r.topic}[{r.partition}] planned from ledger offset {r.ledger_offset if r.ledger_offset is not None else 'none'}"
            f" but the ledger now holds {now if now is not None else 'none'}" for r, now in stale)
        raise FencedError(f"fenced: pipeline '{pipeline}' batch {batch_id} lost the race for its offsets ({detail}); "
                          "another run committed them first, nothing from this batch was written")
    cur.executemany(
        "INSERT INTO microingest.ledger (pipeline, topic, partition, next_offset, batch_id, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (pipeline, topic, partition) DO UPDATE "
        "SET next_offset = EXCLUDED.next_offset, batch_id = EXCLUDED.batch_id, updated_at = now()",
        [(pipeline, r.topic, r.partition, r.until_offset, batch_id) for r in ranges])


def fence_below(cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str) -> None:
    """Inside a backfill batch's transaction: every range must end at or below its partition's live position.

    Holding the pipeline lock and the ledger rows until COMMIT means no live batch can commit in between, and the
    ledger never moves backwards, so the live pipeline will never read these offsets."""
    current = _locked_positions(cur, pipeline, ranges)
    above = [(r, current.get((r.topic, r.partition))) for r in ranges
             if current.get((r.topic, r.partition)) is None or r.until_offset > current[(r.topic, r.partition)]]
    if above:
        detail = "; ".join(f"{r} but the live position is {'not set' if now is None else now}" for r, now in above)
        raise FencedError(f"fenced: backfill batch {batch_id} of pipeline '{pipeline}' reaches offsets the live "
                          f"pipeline owns ({detail}); nothing from this batch was written")


def pin_positions(params: dict[str, Any], pipeline: str, pins: Sequence[OffsetRange], run: RunInfo) -> str | None:
    """Record the starting position of partitions new to the ledger without reading them (start_from=latest)."""
    if not pins:
        return None
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        fence_and_advance(cur, pipeline, pins, batch_id)
        record_batch(cur, pipeline, batch_id, pins, run, BatchRecord("pin", 0, 0, 0, started))
    return batch_id
