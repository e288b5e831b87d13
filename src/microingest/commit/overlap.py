"""Backfill overlap: what a backfill batch does about source positions that are already in the target.

Policies (the `overlap` param of a run):
- refuse (default): nothing is written; the error names each overlapping partition and offset range.
- replace: the target rows and dead letters at the positions the batch replays (those it staged) are deleted and
  the replayed records written, in the batch's one transaction. Positions in its ranges that the read did not bring
  (compacted away, aborted, a marker) keep what the target holds: no backfill could write them again.
- skip_existing: only positions not yet in the target (nor among the dead letters) are written.

"In the target" means: a target row carries the position (append, upsert_latest) or the position is a dead letter
of this pipeline. An upsert_latest target holds only each key's newest record, and its sink never lets an older one
overwrite it or bring back a deleted key, so replays there are safe whatever the policy decides about positions.
Under replace a key's row goes only when the batch replays the row's own position, and the key then holds its newest
replayed record: that same record decoded again, or, should it now be a dead letter, the newest one that decodes.
Aggregate targets keep no positions and add up, so for them the batch history decides: a position some committed
batch already counted is refused whatever the policy, as counting it again would double it.

A position an operator skipped was never ingested: its dead letter (error_class `skipped`) is no overlap under any
policy or sink. A backfill that reads it again resolves it: the skipped dead letter goes, in the same transaction,
and the record lands as a row or as a dead letter of today's reason; the skip batch stays in the history. A dead
letter a redrive resolved (`commit.redrive`), skipped or not, is a position in the target, counted by an aggregate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg2 import sql

from microingest.batches import OffsetRange
from microingest.commit.ledger import LedgerError
from microingest.commit.sinks import SKIPPED, Sink, StagedCounts

OVERLAP_POLICIES = ("refuse", "replace", "skip_existing")
Position = tuple[str, int, int]  # topic, partition, offset
FILTERED = sql.Identifier("microingest_staged_filtered")
_SHOWN = 12  # overlapping ranges named in an error; the count of the rest follows


class OverlapError(LedgerError):
    """A backfill would write positions that are already in the target, and its policy says not to."""


def ranges_unnest(ranges: Sequence[OffsetRange]) -> tuple[sql.SQL, tuple[list[str], list[int], list[int], list[int]]]:
    """A set-returning SQL expression yielding one row (topic, partition, from, until) per range, and its parameters.

    The ranges travel as four parallel arrays, one parameter each, so a batch of any number of ranges is a statement
    of one fixed text; the casts give Postgres the element types even when the arrays are empty."""
    return (
        sql.SQL("unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[])"),
        (
            [r.topic for r in ranges],
            [r.partition for r in ranges],
            [r.from_offset for r in ranges],
            [r.until_offset for r in ranges],
        ),
    )


def _ranges_cte(ranges: Sequence[OffsetRange]) -> tuple[sql.Composable, tuple]:
    rows, args = ranges_unnest(ranges)
    return sql.SQL("r (topic, part, lo, hi) AS (SELECT * FROM {})").format(rows), args


def _present(sink: Sink) -> sql.Composable:
    """(topic, part, o) of every position of the ranges CTE `r` present in the target or the dead letters."""
    return sql.SQL(
        "SELECT t.source_topic AS topic, t.source_partition AS part, t.source_offset AS o FROM {target} t JOIN r "
        "ON t.source_topic = r.topic AND t.source_partition = r.part "
        "AND t.source_offset >= r.lo AND t.source_offset < r.hi "
        'UNION SELECT d.topic, d.partition, d."offset" FROM microingest.dead_letters d JOIN r ON d.pipeline = %s '
        'AND d.topic = r.topic AND d.partition = r.part AND d."offset" >= r.lo AND d."offset" < r.hi '
        "AND (d.error_class <> {skipped} OR d.resolved_by IS NOT NULL)"
    ).format(target=sink.target, skipped=sql.Literal(SKIPPED))


_COUNTED = sql.SQL(
    "SELECT r.topic, r.part, greatest((e->>'from')::bigint, r.lo) AS lo, least((e->>'until')::bigint, r.hi) AS hi "
    "FROM microingest.batches b CROSS JOIN LATERAL jsonb_array_elements(b.ranges) e JOIN r ON e->>'topic' = r.topic "
    "AND (e->>'partition')::int = r.part AND (e->>'from')::bigint < r.hi AND (e->>'until')::bigint > r.lo "
    "WHERE b.pipeline = %s AND b.kind IN ('ingest', 'backfill') "
    # A redrive counted the dead letters it resolved, skipped ones too (whose skip batch counted nothing).
    'UNION ALL SELECT r.topic, r.part, d."offset", d."offset" + 1 FROM microingest.dead_letters d JOIN r ON '
    'd.pipeline = %s AND d.topic = r.topic AND d.partition = r.part AND d."offset" >= r.lo AND d."offset" < r.hi '
    "AND d.resolved_by IS NOT NULL"
)


def overlapping(cur, sink: Sink, ranges: Sequence[OffsetRange]) -> list[tuple[str, int, int, int, int]]:
    """Runs of consecutive positions already ingested: (topic, partition, from, until, records)."""
    cte, args = _ranges_cte(ranges)
    name = sink.pipeline.name
    if sink.mode == "aggregate":
        cur.execute(
            sql.SQL("WITH {} SELECT topic, part, lo, hi, hi - lo FROM ({}) c ORDER BY 1, 2, 3").format(cte, _COUNTED),
            (*args, name, name),
        )
        return _merged(cur.fetchall())
    cur.execute(
        sql.SQL(
            "WITH {}, p AS ({}) SELECT topic, part, min(o), max(o) + 1, count(*) FROM (SELECT topic, "
            "part, o, o - row_number() OVER (PARTITION BY topic, part ORDER BY o) AS island FROM p) x "
            "GROUP BY topic, part, island ORDER BY 1, 2, 3"
        ).format(cte, _present(sink)),
        (*args, name),
    )
    return cur.fetchall()


def _merged(spans: list[tuple]) -> list[tuple]:
    out: list[list] = []
    for topic, part, lo, hi, _ in spans:
        if out and out[-1][:2] == [topic, part] and lo <= out[-1][3]:
            out[-1][3] = max(out[-1][3], hi)
        else:
            out.append([topic, part, lo, hi])
    return [(t, p, lo, hi, hi - lo) for t, p, lo, hi in out]


def describe(spans: list[tuple]) -> str:
    shown = ", ".join(f"{OffsetRange(t, p, lo, hi, None)} ({n} records)" for t, p, lo, hi, n in spans[:_SHOWN])
    more = f" and {len(spans) - _SHOWN} more ranges" if len(spans) > _SHOWN else ""
    return shown + more


def check_overlap(cur, sink: Sink, ranges: Sequence[OffsetRange], policy: str) -> None:
    """Raise OverlapError when the policy (or, for aggregates, the sink) forbids writing over these ranges."""
    if policy not in OVERLAP_POLICIES:
        raise OverlapError(f"overlap policy must be one of {', '.join(OVERLAP_POLICIES)}, got {policy!r}")
    if sink.mode != "aggregate" and policy != "refuse":
        return
    spans = overlapping(cur, sink, ranges)
    if not spans:
        return
    if sink.mode == "aggregate":
        raise OverlapError(
            f"pipeline '{sink.pipeline.name}' has an aggregate target, which adds up: these positions were already "
            f"counted and would be counted twice: {describe(spans)}. Whatever the overlap policy, only offsets never "
            "ingested can be backfilled into an aggregate; nothing was written"
        )
    raise OverlapError(
        f"pipeline '{sink.pipeline.name}': the backfill overlaps records already in {sink.pipeline.target_table} or "
        f"its dead letters: {describe(spans)}. With overlap 'refuse' nothing was written; choose 'replace' to "
        "rewrite those positions or 'skip_existing' to write only positions not yet there"
    )


def _staged_positions(sink: Sink) -> sql.Composable:
    """(topic, part, o) of every row and dead letter staged for a batch; takes its id twice. Both staging tables
    are indexed on batch_id first, so only the batch's own entries are read."""
    return sql.SQL(
        "SELECT source_topic AS topic, source_partition AS part, source_offset AS o FROM {} WHERE batch_id "
        '= %s UNION ALL SELECT topic, partition, "offset" FROM {} WHERE batch_id = %s'
    ).format(sink.staging, sink.staged_dead)


def _dead_letters_at_staged(sink: Sink, only: str | None = None) -> sql.Composable:
    """DELETE the pipeline's dead letters (of error_class `only`, or all) at the positions the batch staged; takes
    the batch id twice, then the pipeline's name."""
    of_class = sql.SQL("") if only is None else sql.SQL(" AND d.error_class = {}").format(sql.Literal(only))
    return sql.SQL(
        "WITH s AS ({}) DELETE FROM microingest.dead_letters d USING s WHERE d.pipeline = %s AND "
        'd.topic = s.topic AND d.partition = s.part AND d."offset" = s.o{}'
    ).format(_staged_positions(sink), of_class)


def _replace(cur, sink: Sink, batch_id: str) -> None:
    """Delete what the target and the dead letters hold at the positions the batch replays, and nothing else: a
    position of its ranges the read did not bring (compaction removed it) keeps its row or dead letter. A position
    staged as a dead letter frees its target row too, and one staged as a row its dead letter: the replay decides."""
    staged = _staged_positions(sink)
    cur.execute(
        sql.SQL(
            "WITH s AS ({}) DELETE FROM {} t USING s WHERE t.source_topic = s.topic AND "
            "t.source_partition = s.part AND t.source_offset = s.o"
        ).format(staged, sink.target),
        (batch_id, batch_id),
    )
    cur.execute(_dead_letters_at_staged(sink), (batch_id, batch_id, sink.pipeline.name))


def _skip_existing(cur, sink: Sink, batch_id: str, ranges: Sequence[OffsetRange]) -> None:
    """Unstage the batch's records whose positions the target or the dead letters already hold."""
    cte, args = _ranges_cte(ranges)
    present = _present(sink)
    cur.execute(
        sql.SQL(
            "WITH {}, p AS ({}) DELETE FROM {} s USING p WHERE s.batch_id = %s AND s.source_topic = "
            "p.topic AND s.source_partition = p.part AND s.source_offset = p.o"
        ).format(cte, present, sink.staging),
        (*args, sink.pipeline.name, batch_id),
    )
    cur.execute(
        sql.SQL(
            "WITH {}, p AS ({}) DELETE FROM {} s USING p WHERE s.batch_id = %s AND s.topic = p.topic "
            'AND s.partition = p.part AND s."offset" = p.o'
        ).format(cte, present, sink.staged_dead),
        (*args, sink.pipeline.name, batch_id),
    )


@dataclass(frozen=True)
class Settled:
    """What a backfill batch publishes once its overlap is settled, and how many skipped positions it resolves."""

    kept: StagedCounts
    resolved_skips: int
    present_filtered: int = 0  # records transform_sql filtered out whose positions were already there

    def note(self) -> str | None:
        return f"resolved {self.resolved_skips} skipped position(s)" if self.resolved_skips else None


def settle_overlap(
    cur, sink: Sink, batch_id: str, ranges: Sequence[OffsetRange], policy: str, filtered_at: Sequence[Position] = ()
) -> Settled:
    """Inside a backfill batch's transaction, before publishing: apply the policy, then resolve the skipped dead
    letters at the positions that stay staged (each becomes that row or dead letter) and at those its transform_sql
    filtered out (`filtered_at`: the record's fate now is to be filtered)."""
    check_overlap(cur, sink, ranges, policy)
    present = _filtered_present(cur, sink, filtered_at) if filtered_at else 0
    # An aggregate's ranges passed check_overlap only if never counted: nothing of them to replace or skip.
    if policy == "replace" and sink.mode != "aggregate":
        if present:
            # What the target or the dead letters hold there would stay beside a replay that filters the record
            # out: two fates for one record.
            raise OverlapError(
                f"batch {batch_id}: a backfill with overlap replace replays {present} record(s) its transform_sql "
                "now filters out at positions the target or the dead letters already hold, which would stay. "
                "Nothing was committed; backfill with overlap skip_existing, or delete those rows first"
            )
        _replace(cur, sink, batch_id)
    elif policy == "skip_existing" and sink.mode != "aggregate":
        _skip_existing(cur, sink, batch_id, ranges)
    cur.execute(_dead_letters_at_staged(sink, only=SKIPPED), (batch_id, batch_id, sink.pipeline.name))
    resolved = cur.rowcount
    if filtered_at:
        cur.execute(
            sql.SQL(
                "DELETE FROM microingest.dead_letters d USING {} f WHERE d.pipeline = %s AND d.topic = f.topic AND "
                'd.partition = f.part AND d."offset" = f.o AND d.error_class = {} AND d.resolved_by IS NULL'
            ).format(FILTERED, sql.Literal(SKIPPED)),
            (sink.pipeline.name,),
        )
        resolved += cur.rowcount
    counts = []
    for table in (sink.staging, sink.staged_dead):
        cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE batch_id = %s").format(table), (batch_id,))
        counts.append(cur.fetchone()[0])
    return Settled(StagedCounts(*counts), resolved, present if policy == "skip_existing" else 0)


def _filtered_present(cur, sink: Sink, filtered_at: Sequence[Position]) -> int:
    """Stage the positions the batch's transform_sql filtered out (FILTERED, dropped at COMMIT); returns how many of
    them the target or the dead letters already hold (a skip's unresolved dead letter is no record there)."""
    cur.execute(sql.SQL("CREATE TEMP TABLE {} (topic text, part integer, o bigint) ON COMMIT DROP").format(FILTERED))
    cur.execute(
        sql.SQL("INSERT INTO {} SELECT * FROM unnest(%s::text[], %s::int[], %s::bigint[])").format(FILTERED),
        ([t for t, _, _ in filtered_at], [p for _, p, _ in filtered_at], [o for _, _, o in filtered_at]),
    )
    held = (
        sql.SQL(
            "SELECT 1 FROM {} t WHERE t.source_topic = f.topic AND t.source_partition = f.part "
            "AND t.source_offset = f.o"
        ).format(sink.target)
        if sink.mode != "aggregate"
        else sql.SQL("SELECT 1 WHERE false")
    )
    cur.execute(
        sql.SQL(
            "SELECT count(*) FROM {} f WHERE EXISTS ({}) OR EXISTS (SELECT 1 FROM microingest.dead_letters d WHERE "
            'd.pipeline = %s AND d.topic = f.topic AND d.partition = f.part AND d."offset" = f.o AND '
            "(d.error_class <> {} OR d.resolved_by IS NOT NULL))"
        ).format(FILTERED, held, sql.Literal(SKIPPED)),
        (sink.pipeline.name,),
    )
    return cur.fetchone()[0]
