"""Reading a pipeline's unresolved dead letters: what a redrive would take (by partition and error class) and the
records themselves, page by page in position order. Writes nothing; the redrive's commit (`commit.redrive`) decides
under the pipeline's lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from psycopg2 import sql

from microingest.batches import WITHHELD_MARK, OffsetRange, RedriveSelection, StoredRecord
from microingest.commit.overlap import ranges_unnest


class UnresolvedGroup(NamedTuple):
    """The unresolved dead letters of one partition and error class."""

    topic: str
    partition: int
    error_class: str
    records: int
    first: int
    last: int
    sample: str  # the reason of the first of them
    withheld: bool = False  # a masked pipeline's: no record kept to decode, never redriven


# A masked pipeline's dead letter (`batches.WITHHELD_MARK`): it keeps no key, value or headers, so decoded again
# it would be a tombstone. Its record is read again from Kafka by a backfill over its position.
WITHHELD = sql.SQL("starts_with(d.error_message, {})").format(sql.Literal(WITHHELD_MARK))


def _selected(pipeline: str, ranges: Sequence[OffsetRange], selection: RedriveSelection) -> tuple[sql.Composable, list]:
    """WHERE of the unresolved dead letters of `pipeline` inside `ranges` that `selection` takes (alias d), withheld
    ones among them."""
    rows, range_args = ranges_unnest(ranges)
    where = [
        sql.SQL("d.pipeline = %s AND d.resolved_by IS NULL"),
        sql.SQL(
            "EXISTS (SELECT 1 FROM {} AS r (topic, part, lo, hi) WHERE d.topic = r.topic AND d.partition = r.part AND "
            'd."offset" >= r.lo AND d."offset" < r.hi)'
        ).format(rows),
    ]
    # A topic deleted and created again under its name starts its offsets over: dead letters written before the
    # pipeline restarted on it hold the old topic's records, whose positions the new one's may take.
    where.append(
        sql.SQL(
            "d.created_at > coalesce((SELECT max(b.committed_at) FROM microingest.batches b WHERE b.pipeline = "
            "d.pipeline AND b.kind = 'restart' AND b.ranges @> jsonb_build_array(jsonb_build_object('topic', "
            "d.topic))), '-infinity')"
        )
    )
    args: list = [pipeline, *range_args]
    if selection.error_class is not None:
        where.append(sql.SQL("d.error_class = %s"))
        args.append(selection.error_class)
    if selection.since is not None:
        where.append(sql.SQL("d.created_at >= %s"))
        args.append(selection.since)
    return sql.SQL(" AND ").join(where), args


def unresolved_groups(
    cur, pipeline: str, ranges: Sequence[OffsetRange], selection: RedriveSelection
) -> list[UnresolvedGroup]:
    where, args = _selected(pipeline, ranges, selection)
    cur.execute(
        sql.SQL(
            'SELECT d.topic, d.partition, d.error_class, count(*), min(d."offset"), max(d."offset"), '
            '(array_agg(d.error_message ORDER BY d."offset"))[1], {} FROM microingest.dead_letters d WHERE {} '
            "GROUP BY 1, 2, 3, 8 ORDER BY 1, 2, 3, 8"
        ).format(WITHHELD, where),
        args,
    )
    return [UnresolvedGroup(*row) for row in cur.fetchall()]


def unresolved_page(
    cur,
    pipeline: str,
    ranges: Sequence[OffsetRange],
    selection: RedriveSelection,
    after: tuple[str, int, int] | None,
    limit: int,
    max_bytes: int,
) -> list[StoredRecord]:
    """The next selected dead letters after position `after` (topic, partition, offset), in position order, never a
    withheld one: at most `limit`, ending with the first whose key, value and headers bring the page past
    `max_bytes` (one at least, whatever its size)."""
    where, args = _selected(pipeline, ranges, selection)
    where = sql.SQL("{} AND NOT {}").format(where, WITHHELD)
    if after is not None:
        where = sql.SQL('{} AND (d.topic, d.partition, d."offset") > (%s, %s, %s)').format(where)
        args += list(after)
    cur.execute(
        sql.SQL(
            'SELECT topic, partition, "offset", kafka_timestamp, record_key, record_value, headers FROM (SELECT p.*, '
            'sum(p.size) OVER (ORDER BY p.topic, p.partition, p."offset") - p.size AS before FROM (SELECT d.topic, '
            'd.partition, d."offset", d.kafka_timestamp, d.record_key, d.record_value, d.headers, '
            "coalesce(octet_length(d.record_key), 0) + coalesce(octet_length(d.record_value), 0) + "
            "coalesce(octet_length(d.headers::text), 0) AS size FROM microingest.dead_letters d WHERE {} "
            'ORDER BY d.topic, d.partition, d."offset" LIMIT %s) p) x WHERE before = 0 OR before < %s '
            'ORDER BY topic, partition, "offset"'
        ).format(where),
        [*args, limit, max_bytes],
    )
    return [
        StoredRecord(t, p, o, ts, None if k is None else bytes(k), None if v is None else bytes(v), h)
        for t, p, o, ts, k, v, h in cur.fetchall()
    ]
