"""Inside a redrive batch's transaction, under the pipeline's lock: what it decoded is weighed against the dead letters
as they are now, then each stays a dead letter with today's reason or is marked resolved by the batch.

Only a dead letter still unresolved at the commit counts: one that another redrive resolved since this batch read
it, or that a backfill replaced, is unstaged with its record, so no record lands twice however redrives, retries and
backfills interleave (the lock serialises their commits). The records that now decode are published by the sink's
own rules (an upsert keeps each key's newest record, an aggregate adds each position once: its dead letter is
resolved in the same transaction).
"""

from __future__ import annotations

from psycopg2 import sql

from microingest.commit.sinks import SKIPPED, Sink, StagedCounts

_ROW_POSITION = ("source_topic", "source_partition", "source_offset")
_DEAD_POSITION = ("topic", "partition", "offset")


def _matches(position: tuple[str, str, str]) -> sql.Composable:
    topic, partition, offset = map(sql.Identifier, position)
    return sql.SQL('d.pipeline = %s AND d.topic = s.{} AND d.partition = s.{} AND d."offset" = s.{}').format(
        topic, partition, offset
    )


def settle_redrive(cur, sink: Sink, batch_id: str) -> StagedCounts:
    """Unstage the records whose dead letters are no longer unresolved; returns what stays staged."""
    counts = []
    for table, position in ((sink.staging, _ROW_POSITION), (sink.staged_dead, _DEAD_POSITION)):
        cur.execute(
            sql.SQL(
                "DELETE FROM {} s WHERE s.batch_id = %s AND NOT EXISTS (SELECT 1 FROM microingest.dead_letters d "
                "WHERE {} AND d.resolved_by IS NULL)"
            ).format(table, _matches(position)),
            (batch_id, sink.pipeline.name),
        )
        cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE batch_id = %s").format(table), (batch_id,))
        counts.append(cur.fetchone()[0])
    return StagedCounts(*counts)


def resolve_redriven(cur, sink: Sink, batch_id: str) -> None:
    """After the publish: the staged rows' dead letters resolved by this batch, the staged dead letters' reasons
    brought up to date."""
    cur.execute(
        sql.SQL(
            "UPDATE microingest.dead_letters d SET resolved_by = %s, resolved_at = clock_timestamp(), "
            "redriven_by = %s, redrives = d.redrives + 1 FROM {} s WHERE s.batch_id = %s AND {}"
        ).format(sink.staging, _matches(_ROW_POSITION)),
        (batch_id, batch_id, batch_id, sink.pipeline.name),
    )
    # A skipped record that still fails stays `skipped`: it was never ingested, so a backfill over the skip still
    # resolves it (and an aggregate, whose history never counted it, may count it then); today's reason goes in
    # its message.
    cur.execute(
        sql.SQL(
            "UPDATE microingest.dead_letters d SET error_class = CASE WHEN d.error_class = {skipped} THEN "
            "d.error_class ELSE s.error_class END, error_message = CASE WHEN d.error_class = {skipped} THEN "
            "'still failing after a redrive: ' || s.error_class || ': ' || s.error_message ELSE s.error_message END, "
            "redriven_by = %s, redrives = d.redrives + 1 FROM {table} s WHERE s.batch_id = %s AND {matches}"
        ).format(skipped=sql.Literal(SKIPPED), table=sink.staged_dead, matches=_matches(_DEAD_POSITION)),
        (batch_id, batch_id, sink.pipeline.name),
    )
