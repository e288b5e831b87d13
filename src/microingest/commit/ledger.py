"""The ledger (microingest.ledger): per pipeline and partition, the next offset the live pipeline reads.

It moves only inside the transaction that publishes the records below it (`fence_and_advance`), which is what makes
live ingestion exactly-once. Backfills never move it; they must stay below it (`fence_below`), because everything
at and above a partition's position is the live pipeline's to take.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from microingest.batches import OffsetRange, RunInfo
from microingest.commit.history import BatchRecord, record_batch
from microingest.errors import Refused
from microingest.systems.postgres import advisory_lock, connection

log = logging.getLogger(__name__)


class LedgerError(Refused):
    """The commit protocol refused a batch; nothing of it was written."""


class FencedError(LedgerError):
    """The ledger moved since the batch was planned: another run committed (some of) these offsets."""


def read_ledger(conn, pipeline: str, topic: str) -> dict[int, int]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = %s",
            (pipeline, topic),
        )
        return dict(cur.fetchall())


def lock_pipeline(cur, pipeline: str) -> None:
    """Serialise the commits of one pipeline (live batches, backfill batches, pins) for the rest of the transaction."""
    advisory_lock(cur, f"microingest:pipeline:{pipeline}", transaction=True)


def ledger_topic_ids(conn, pipeline: str, topic: str) -> set[str]:
    """The Kafka topic ids the pipeline's live positions on `topic` were committed under (none before the first)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT topic_id::text FROM microingest.ledger WHERE pipeline = %s AND topic = %s AND "
            "topic_id IS NOT NULL",
            (pipeline, topic),
        )
        return {r[0] for r in cur.fetchall()}


def _locked_positions(
    cur, pipeline: str, ranges: Sequence[OffsetRange], topic_id: str | None
) -> dict[tuple[str, int], int]:
    """The ledger rows of the ranges' topics, locked until COMMIT; FencedError when they belong to another topic id
    than the batch was planned on (the topic was deleted and created again since)."""
    lock_pipeline(cur, pipeline)
    cur.execute(
        "SELECT topic, partition, next_offset, topic_id::text FROM microingest.ledger WHERE pipeline = %s "
        "AND topic = ANY(%s) FOR UPDATE",
        (pipeline, sorted({r.topic for r in ranges})),
    )
    rows = cur.fetchall()
    others = sorted({t for _, _, _, t in rows if t is not None and topic_id is not None and t != topic_id})
    if others:
        raise FencedError(
            f"fenced: pipeline '{pipeline}' was planned on topic id {topic_id} but its live positions "
            f"belong to topic id {', '.join(others)}: the topic was deleted and created again in "
            "between; nothing from this batch was written"
        )
    return {(t, p): o for t, p, o, _ in rows}


def fence_and_advance(
    cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str, topic_id: str | None = None
) -> None:
    """Inside the commit transaction: verify every range's planned start, then move the ledger to its end (recording
    the topic id it was planned on, when known)."""
    current = _locked_positions(cur, pipeline, ranges, topic_id)
    stale = [
        (r, current.get((r.topic, r.partition)))
        for r in ranges
        if current.get((r.topic, r.partition)) != r.ledger_offset
    ]
    if stale:
        detail = "; ".join(
            f"{r.topic}[{r.partition}] planned from ledger offset {_shown(r.ledger_offset)}"
            f" but the ledger now holds {_shown(now)}"
            for r, now in stale
        )
        raise FencedError(
            f"fenced: pipeline '{pipeline}' batch {batch_id} lost the race for its offsets ({detail}); "
            "another run committed them first, nothing from this batch was written"
        )
    cur.executemany(
        "INSERT INTO microingest.ledger (pipeline, topic, partition, next_offset, batch_id, topic_id, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, now()) ON CONFLICT (pipeline, topic, partition) DO UPDATE "
        "SET next_offset = EXCLUDED.next_offset, batch_id = EXCLUDED.batch_id, "
        "topic_id = coalesce(EXCLUDED.topic_id, microingest.ledger.topic_id), updated_at = now()",
        [(pipeline, r.topic, r.partition, r.until_offset, batch_id, topic_id) for r in ranges],
    )


def fence_below(cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str, topic_id: str | None = None) -> None:
    """Inside a backfill batch's transaction: every range must end at or below its partition's live position.

    Holding the pipeline lock and the ledger rows until COMMIT means no live batch can commit in between, and the
    ledger never moves backwards, so the live pipeline will never read these offsets."""
    current = _locked_positions(cur, pipeline, ranges, topic_id)
    above = [
        (r, current.get((r.topic, r.partition)))
        for r in ranges
        if current.get((r.topic, r.partition)) is None or r.until_offset > current[(r.topic, r.partition)]
    ]
    if above:
        detail = "; ".join(f"{r} but the live position is {'not set' if now is None else now}" for r, now in above)
        raise FencedError(
            f"fenced: backfill batch {batch_id} of pipeline '{pipeline}' reaches offsets the live "
            f"pipeline owns ({detail}); nothing from this batch was written"
        )


def pin_positions(
    params: dict[str, Any], pipeline: str, pins: Sequence[OffsetRange], run: RunInfo, topic_id: str | None = None
) -> str | None:
    """Record the starting position of partitions new to the ledger without reading them (start_from=latest)."""
    if not pins:
        return None
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        fence_and_advance(cur, pipeline, pins, batch_id, topic_id)
        record_batch(cur, pipeline, batch_id, pins, run, BatchRecord("pin", 0, 0, 0, started))
    return batch_id


def restart_topic(
    params: dict[str, Any], pipeline: str, topic: str, topic_id: str, start_from: str, run: RunInfo
) -> str | None:
    """Forget the live positions of a topic deleted and created again (on_topic_recreated: restart), so the next plan
    starts the new topic from `start_from`; in one transaction under the pipeline lock, recorded in the history as a
    batch of kind `restart` whose ranges are the old positions and whose note says what happened. None when another
    run restarted it first."""
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        lock_pipeline(cur, pipeline)
        cur.execute(
            "SELECT partition, next_offset, topic_id::text FROM microingest.ledger WHERE pipeline = %s AND "
            "topic = %s ORDER BY partition FOR UPDATE",
            (pipeline, topic),
        )
        rows = cur.fetchall()
        old_ids = sorted({t for _, _, t in rows if t is not None and t != topic_id})
        if not old_ids:
            return None
        cur.execute("DELETE FROM microingest.ledger WHERE pipeline = %s AND topic = %s", (pipeline, topic))
        left = [OffsetRange(topic, p, o, o, o) for p, o, _ in rows]
        note = (
            f"topic {topic} was deleted and created again (Kafka topic id {', '.join(old_ids)} -> {topic_id}): "
            f"the old topic's live positions ({', '.join(f'[{r.partition}] {r.from_offset}' for r in left)}) "
            f"are left behind and the new topic is read from start_from ({start_from})"
        )
        record_batch(cur, pipeline, batch_id, left, run, BatchRecord("restart", 0, 0, 0, started, note=note))
    log.warning(note)
    return batch_id


def _shown(offset: int | None) -> str:
    return "none" if offset is None else str(offset)
