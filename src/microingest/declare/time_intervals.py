"""The time intervals a declaration writes for a partitioned target: `interval: 1 day` (N hours, days or months) and
`retain: 90 days` (N hours or days), and where an interval of N units starts: on multiples of N hours or days since
1970-01-01 UTC, or of N months since January 1970. Pure; `commit.partition_ranges` places partitions by them.

Also a duration as the lag section writes one (`retention_margin: 6h`): seconds, or N seconds, minutes, hours or
days, spelt out or as s, m, h, d.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_AMOUNT = re.compile(r"^([1-9]\d{0,3}) (hour|day|month)s?$")
_UNITS = {"hour": timedelta(hours=1), "day": timedelta(days=1)}
_DURATION = re.compile(r"^([1-9]\d{0,8}) ?(s|m|h|d|seconds?|minutes?|hours?|days?)$")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# What a partition's name adds to its table's, at most (`commit.partition_ranges.partition_name`): the table's name
# must leave room for it within Postgres' 63 characters.
NAME_SUFFIX_MAX = len("_p") + 14 + len("_99")


@dataclass(frozen=True)
class Interval:
    count: int
    unit: str  # hour | day | month

    @classmethod
    def parse(cls, text: str) -> Interval:
        match = _AMOUNT.match(text)
        if match is None:
            raise ValueError(f"must look like '1 day', '6 hours' or '1 month', got {text!r}")
        return cls(int(match[1]), match[2])

    def start(self, instant: datetime) -> datetime:
        """The start of the interval holding `instant` (the first instant Python holds, for an interval that would
        start before the year 1)."""
        instant = instant.astimezone(timezone.utc)
        try:
            if self.unit == "month":
                months = (instant.year - 1970) * 12 + instant.month - 1
                months -= months % self.count
                return datetime(1970 + months // 12, months % 12 + 1, 1, tzinfo=timezone.utc)
            step = _UNITS[self.unit] * self.count
            return EPOCH + ((instant - EPOCH) // step) * step
        except (OverflowError, ValueError):
            return datetime.min.replace(tzinfo=timezone.utc)

    def end(self, start: datetime) -> datetime:
        """The start of the next interval (the last instant Python holds, for the interval that ends the year 9999)."""
        try:
            if self.unit == "month":
                months = (start.year - 1970) * 12 + start.month - 1 + self.count
                return datetime(1970 + months // 12, months % 12 + 1, 1, tzinfo=timezone.utc)
            return start + _UNITS[self.unit] * self.count
        except (OverflowError, ValueError):
            return datetime.max.replace(tzinfo=timezone.utc)


def retention(text: str) -> timedelta:
    match = _AMOUNT.match(text)
    if match is None or match[2] == "month":
        raise ValueError(f"must look like '90 days' or '36 hours', got {text!r}")
    return _UNITS[match[2]] * int(match[1])


def duration_seconds(value: int | str) -> int:
    """A duration (seconds, or text such as '6h' or '90 minutes') in whole seconds."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"must be a positive number of seconds, got {value}")
        return value
    match = _DURATION.match(value) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"must be seconds or look like '6h', '90 minutes' or '2 days', got {value!r}")
    return int(match[1]) * _DURATION_UNITS[match[2][0]]
