"""The proof a decoded batch carries to its commit: which positions the executors read.

Each executor reports, for every chunk it decodes, one `Span` per Kafka partition in it: the first and last offset
and how many records, after checking that the offsets rise strictly (each position once). Before anything is written
the commit checks that every span lies inside a planned range, that no two spans share a position, and that the
records they count are exactly the rows and dead letters decoded. A retried or speculative Spark task cannot add
records (Spark keeps one result per partition), so this is what remains to catch: a read that does not match the plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from microingest.batches import OffsetRange, Span
from microingest.commit.ledger import LedgerError


class ReadMismatchError(LedgerError):
    """The records read do not match the plan (outside its ranges, or a position twice); a retry would read the same."""


def prove_read(spans: Sequence[Span], ranges: Sequence[OffsetRange], decoded: int, batch_id: str) -> None:
    """Raise ReadMismatchError unless the spans cover `decoded` records, each at a distinct position inside a range."""
    planned = {(r.topic, r.partition): r for r in ranges}
    outside = [s for s in spans if not _inside(s, planned.get((s.topic, s.partition)))]
    if outside:
        raise ReadMismatchError(
            f"batch {batch_id}: {len(outside)} chunk(s) read positions outside the planned ranges "
            f"(e.g. {outside[0]}); the read did not match the plan, nothing was committed"
        )
    twice = _overlapping(spans)
    if twice:
        raise ReadMismatchError(
            f"batch {batch_id}: positions read twice ({twice[0]} and {twice[1]}); nothing was committed"
        )
    counted = sum(s.records for s in spans)
    if counted != decoded:
        raise ReadMismatchError(
            f"batch {batch_id}: the read counted {counted} records but {decoded} were decoded; nothing was committed"
        )


def _inside(span: Span, r: OffsetRange | None) -> bool:
    return (
        r is not None
        and r.from_offset <= span.first <= span.last < r.until_offset
        and 0 < span.records <= span.last - span.first + 1
    )


def _overlapping(spans: Sequence[Span]) -> tuple[Span, Span] | None:
    ordered = sorted(spans, key=lambda s: (s.topic, s.partition, s.first))
    for a, b in itertools.pairwise(ordered):
        if (a.topic, a.partition) == (b.topic, b.partition) and b.first <= a.last:
            return a, b
    return None
