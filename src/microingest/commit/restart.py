"""A recreated topic's restart (on_topic_recreated: restart): its old live positions forgotten, and everything the
old topic left keyed by position moved aside, in one transaction under the pipeline lock.

The new topic's offsets start over, so its records take positions the old topic's rows, dead letters, remembered
tombstones and batch history still hold. Left as they were, an old row at offset 900,000 would outrank a new record
at offset 17 of the same key, an old dead letter would refuse a new one at its position, and a backfill of the new
topic would find the old one's records there. Moved aside, they keep everything but their topic's name, which
becomes `set_aside_name`: no Kafka topic can take it, so nothing of the new topic is ever confused with them.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timezone
from typing import Any

from psycopg2 import sql

from microingest.batches import OffsetRange, RunInfo
from microingest.commit.history import BatchRecord, record_batch
from microingest.commit.ledger import lock_pipeline
from microingest.commit.sinks import UpsertLatestSink, sink_for
from microingest.declare.pipeline import Pipeline
from microingest.systems.postgres import connection

log = logging.getLogger(__name__)


def set_aside_name(topic: str, topic_ids: list[str]) -> str:
    """What a restarted topic's old records are kept under: `@` is no character of a Kafka topic's name."""
    return f"{topic}@{'+'.join(topic_ids)}"


def restart_topic(
    params: dict[str, Any], pipeline: Pipeline, topic: str, topic_id: str, start_from: str, run: RunInfo
) -> str | None:
    """Forget the live positions of a topic deleted and created again, so the next plan starts the new topic from
    `start_from`, and move what the old topic left aside; recorded in the history as a batch of kind `restart` whose
    ranges are the old positions and whose note says what happened. None when another run restarted it first."""
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        lock_pipeline(cur, pipeline.name)
        cur.execute(
            "SELECT partition, next_offset, topic_id::text FROM microingest.ledger WHERE pipeline = %s AND "
            "topic = %s ORDER BY partition FOR UPDATE",
            (pipeline.name, topic),
        )
        rows = cur.fetchall()
        old_ids = sorted({t for _, _, t in rows if t is not None and t != topic_id})
        if not old_ids:
            return None
        cur.execute("DELETE FROM microingest.ledger WHERE pipeline = %s AND topic = %s", (pipeline.name, topic))
        aside = set_aside_name(topic, old_ids)
        moved = _move_aside(cur, pipeline, topic, aside)
        left = [OffsetRange(topic, p, o, o, o) for p, o, _ in rows]
        note = (
            f"topic {topic} was deleted and created again (Kafka topic id {', '.join(old_ids)} -> {topic_id}): "
            f"the old topic's live positions ({', '.join(f'[{r.partition}] {r.from_offset}' for r in left)}) "
            f"are left behind, its {moved} are kept as topic {aside}, and the new topic is read from its "
            f"{start_from} offsets"
        )
        record_batch(cur, pipeline.name, batch_id, left, run, BatchRecord("restart", 0, 0, 0, started, note=note))
    log.warning(note)
    return batch_id


def _move_aside(cur, pipeline: Pipeline, topic: str, aside: str) -> str:
    """Rename `topic` to `aside` wherever the pipeline keys something by position; says what was moved."""
    sink, moved = sink_for(pipeline), []
    if sink.mode != "aggregate":  # an aggregate's rows are groups: they hold no position
        cur.execute("SELECT to_regclass(%s)", (sink.target.as_string(cur),))
        if cur.fetchone()[0] is not None:
            cur.execute(
                sql.SQL("UPDATE {} SET source_topic = %s WHERE source_topic = %s").format(sink.target), (aside, topic)
            )
            moved.append(f"{cur.rowcount} target row(s)")
    if isinstance(sink, UpsertLatestSink):
        cur.execute(
            sql.SQL("UPDATE {} SET source_topic = %s WHERE pipeline = %s AND source_topic = %s").format(
                sink.TOMBSTONES
            ),
            (aside, pipeline.name, topic),
        )
        moved.append(f"{cur.rowcount} remembered tombstone(s)")
    cur.execute(
        "UPDATE microingest.dead_letters SET topic = %s WHERE pipeline = %s AND topic = %s",
        (aside, pipeline.name, topic),
    )
    moved.append(f"{cur.rowcount} dead letter(s)")
    # What earlier batches read (a backfill's overlap and the story of an offset look there) and the lag history
    # describe the old topic's log.
    named = {"t": topic, "a": aside, "p": pipeline.name, "named": json.dumps([{"topic": topic}])}
    for column in ("ranges", "gaps"):  # what they read, and the offsets retention took from them
        cur.execute(
            sql.SQL(
                "UPDATE microingest.batches b SET {c} = (SELECT jsonb_agg(CASE WHEN e->>'topic' = %(t)s THEN "
                "jsonb_set(e, '{{topic}}', to_jsonb(%(a)s::text)) ELSE e END ORDER BY i) FROM "
                "jsonb_array_elements(b.{c}) WITH ORDINALITY AS x(e, i)) "
                "WHERE b.pipeline = %(p)s AND b.{c} @> %(named)s"
            ).format(c=sql.Identifier(column)),
            named,
        )
        if column == "ranges":
            moved.append(f"{cur.rowcount} batch(es) of history")
    cur.execute("DELETE FROM microingest.lag_observations WHERE pipeline = %s AND topic = %s", (pipeline.name, topic))
    return ", ".join(moved)
