"""The ledger (microingest.ledger): per pipeline and partition, the next offset the live pipeline reads.

It moves only inside the transaction that publishes the records below it (`fence_and_advance`), which is what makes
live ingestion exactly-once. Backfills never move it; they must stay below it (`fence_below`), because everything
at and above a partition's position is the live pipeline's to take.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
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


def read_ledgers(conn, pipeline: str) -> dict[str, dict[int, int]]:
    """The pipeline's live positions on every topic it holds any on."""
    with conn.cursor() as cur:
        cur.execute("SELECT topic, partition, next_offset FROM microingest.ledger WHERE pipeline = %s", (pipeline,))
        found: dict[str, dict[int, int]] = {}
        for topic, partition, offset in cur.fetchall():
            found.setdefault(topic, {})[partition] = offset
        return found


def ledger_topic_ids(conn, pipeline: str, topics: Sequence[str]) -> dict[str, set[str]]:
    """Per topic, the Kafka topic ids the pipeline's live positions on it were committed under (none before the
    first)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT topic, topic_id::text FROM microingest.ledger WHERE pipeline = %s AND topic = ANY(%s) "
            "AND topic_id IS NOT NULL",
            (pipeline, list(topics)),
        )
        found: dict[str, set[str]] = {}
        for topic, tid in cur.fetchall():
            found.setdefault(topic, set()).add(tid)
        return found


def _locked_positions(
    cur, pipeline: str, ranges: Sequence[OffsetRange], topic_ids: Mapping[str, str]
) -> dict[tuple[str, int], int]:
    """The ledger rows of the ranges' topics, locked until COMMIT; FencedError when a topic's rows belong to another
    topic id than the batch was planned on (the topic was deleted and created again since)."""
    lock_pipeline(cur, pipeline)
    cur.execute(
        "SELECT topic, partition, next_offset, topic_id::text FROM microingest.ledger WHERE pipeline = %s "
        "AND topic = ANY(%s) FOR UPDATE",
        (pipeline, sorted({r.topic for r in ranges})),
    )
    rows = cur.fetchall()
    others = sorted({(topic, t) for topic, _, _, t in rows if t is not None and topic_ids.get(topic, t) != t})
    if others:
        detail = "; ".join(
            f"{topic}: planned on topic id {topic_ids[topic]}, positions under {t}" for topic, t in others
        )
        raise FencedError(
            f"fenced: pipeline '{pipeline}' was planned on other topic ids than its live positions belong to "
            f"({detail}): the topic was deleted and created again in between; nothing from this batch was written"
        )
    return {(t, p): o for t, p, o, _ in rows}


def fence_and_advance(
    cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str, topic_ids: Mapping[str, str]
) -> None:
    """Inside the commit transaction: verify every range's planned start, then move the ledger to its end (recording
    the topic id it was planned on, when known)."""
    current = _locked_positions(cur, pipeline, ranges, topic_ids)
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
        [(pipeline, r.topic, r.partition, r.until_offset, batch_id, topic_ids.get(r.topic)) for r in ranges],
    )


def fence_below(cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str, topic_ids: Mapping[str, str]) -> None:
    """Inside a backfill batch's transaction: every range must end at or below its partition's live position.

    Holding the pipeline lock and the ledger rows until COMMIT means no live batch can commit in between, and the
    ledger never moves backwards, so the live pipeline will never read these offsets."""
    current = _locked_positions(cur, pipeline, ranges, topic_ids)
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
    params: dict[str, Any], pipeline: str, pins: Sequence[OffsetRange], run: RunInfo, topic_ids: Mapping[str, str]
) -> str | None:
    """Record the starting position of partitions new to the ledger without reading them (start_from=latest)."""
    if not pins:
        return None
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        fence_and_advance(cur, pipeline, pins, batch_id, topic_ids)
        record_batch(cur, pipeline, batch_id, pins, run, BatchRecord("pin", 0, 0, 0, started))
    return batch_id


def record_new_topic(
    params: dict[str, Any], pipeline: str, starts: Sequence[OffsetRange], run: RunInfo, note: str
) -> bool:
    """Record in the history that the pipeline starts a topic (a batch of kind `new_topic`: its ranges where each
    partition is read from, its note why), unless it holds positions on it already or recorded its start since the
    topic was last restarted. Nothing moves: the ledger is the first batch's to set. False when nothing was new."""
    topic = starts[0].topic
    with connection(params) as conn, conn, conn.cursor() as cur:
        lock_pipeline(cur, pipeline)
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM microingest.ledger WHERE pipeline = %(p)s AND topic = %(t)s) OR EXISTS ("
            "SELECT 1 FROM microingest.batches b WHERE pipeline = %(p)s AND kind = 'new_topic' AND ranges @> %(r)s "
            "AND committed_at > coalesce((SELECT max(committed_at) FROM microingest.batches WHERE pipeline = %(p)s "
            "AND kind = 'restart' AND ranges @> %(r)s), '-infinity'))",
            {"p": pipeline, "t": topic, "r": json.dumps([{"topic": topic}])},
        )
        if cur.fetchone()[0]:
            return False
        started = datetime.now(timezone.utc)
        record_batch(
            cur, pipeline, str(uuid.uuid4()), starts, run, BatchRecord("new_topic", 0, 0, 0, started, note=note)
        )
    return True


WAITING = "waiting"  # the history's kind of a pattern pipeline's first plan that found no topic to read


def record_waiting(params: dict[str, Any], pipeline: str, run: RunInfo, note: str) -> bool:
    """Record in the history, once, that a pattern's pipeline was planned while no topic matched and it held no
    positions (a batch of kind `waiting`, no ranges): the topics that come to match later are joiners, read from
    their earliest offsets, not the pipeline's first topics, which its start_from places. False when it was already
    recorded or the pipeline holds positions."""
    with connection(params) as conn, conn, conn.cursor() as cur:
        lock_pipeline(cur, pipeline)
        if has_waited(conn, pipeline, any_positions=True):
            return False
        started = datetime.now(timezone.utc)
        record_batch(cur, pipeline, str(uuid.uuid4()), (), run, BatchRecord(WAITING, 0, 0, 0, started, note=note))
    return True


def has_waited(conn, pipeline: str, any_positions: bool = False) -> bool:
    """The pipeline's first plan found no topic to read (`record_waiting`); with `any_positions`, or it holds
    positions."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT EXISTS (SELECT 1 FROM microingest.batches WHERE pipeline = %(p)s AND kind = %(k)s)"
            + (" OR EXISTS (SELECT 1 FROM microingest.ledger WHERE pipeline = %(p)s)" if any_positions else ""),
            {"p": pipeline, "k": WAITING},
        )
        return bool(cur.fetchone()[0])


def _shown(offset: int | None) -> str:
    return "none" if offset is None else str(offset)
