"""Partitioned targets' range arithmetic (no I/O: `partitions` reads the catalog and runs the DDL).

A declaration's `partition_by: {field, interval, retain}` cuts its target by time: each interval of N hours or days
(aligned on multiples of N since 1970-01-01 UTC) or N months (on multiples of N since January 1970) is one
partition, named after the table and its start (`orders_p20261127`). What a batch needs is worked out from the hours
its rows' instants fall in (every partition's bounds are whole hours, so an hour is in one partition or none): each
within an existing partition or in a new one, the interval around it, cut where it would overlap a partition made
under another interval. Retention drops a partition once its whole range is
older than `retain`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from microingest.declare.time_intervals import Interval

# How many digits of a partition's start (YYYYMMDDHHMMSS) its name writes, by the interval's unit (an interval cut
# short: all of them).
_DIGITS = {"month": 6, "day": 8, "hour": 10}


@dataclass(frozen=True)
class Range:
    """A partition's range of instants, [low, high)."""

    low: datetime
    high: datetime

    def holds(self, instant: datetime) -> bool:
        return self.low <= instant < self.high


def needed(instants: Iterable[datetime], existing: Sequence[Range], interval: Interval) -> list[Range]:
    """The new partitions that hold every instant no existing partition holds: each its interval, cut where it would
    overlap an existing partition."""
    made: list[Range] = []
    for instant in sorted(set(instants)):
        if any(r.holds(instant) for r in (*existing, *made)):
            continue
        low = interval.start(instant)
        high = interval.end(low)
        for other in (*existing, *made):
            if other.high <= instant:
                low = max(low, other.high)
            elif other.low > instant:
                high = min(high, other.low)
        made.append(Range(low, high))
    return made


def partition_name(table: str, part: Range, interval: Interval, taken: Iterable[str]) -> str:
    """`table`_p and the range's start, as the interval's unit writes it (to the second when the range was cut);
    a number added when another partition has the name already."""
    aligned = part.low == interval.start(part.low)
    low = part.low  # written by hand: strftime leaves the year 1 unpadded on some platforms
    digits = f"{low.year:04d}{low.month:02d}{low.day:02d}{low.hour:02d}{low.minute:02d}{low.second:02d}"
    base = f"{table}_p{digits[: _DIGITS[interval.unit]] if aligned else digits}"
    taken = set(taken)
    name, n = base, 1
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def expired(parts: Iterable[tuple[str, Range]], now: datetime, retain: timedelta) -> list[tuple[str, Range]]:
    """The partitions whose every instant is older than `retain`."""
    return [(name, part) for name, part in parts if part.high <= now - retain]
