"""Partitioned targets' range arithmetic: where intervals start, which partitions a batch's hours need (cut around
partitions made under another interval), their names, and which retention drops."""

from datetime import datetime, timedelta, timezone

import pytest

from microingest.commit.partition_ranges import Range, expired, needed, partition_name
from microingest.declare.time_intervals import Interval, retention


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "interval, instant, start, end",
    [
        ("1 day", at(2026, 11, 27, 13, 5), at(2026, 11, 27), at(2026, 11, 28)),
        ("6 hours", at(2026, 11, 27, 13, 5), at(2026, 11, 27, 12), at(2026, 11, 27, 18)),
        ("7 days", at(1970, 1, 8), at(1970, 1, 8), at(1970, 1, 15)),  # multiples of 7 days since 1970-01-01
        ("1 month", at(2026, 12, 31, 23), at(2026, 12, 1), at(2027, 1, 1)),
        ("3 months", at(2026, 11, 27), at(2026, 10, 1), at(2027, 1, 1)),
        ("1 day", at(1, 1, 1, 5), at(1, 1, 1), at(1, 1, 2)),
        ("1 month", at(9999, 12, 31), at(9999, 12, 1), datetime.max.replace(tzinfo=timezone.utc)),
    ],
)
def test_intervals_start_on_multiples_since_1970(interval, instant, start, end):
    parsed = Interval.parse(interval)
    assert (parsed.start(instant), parsed.end(parsed.start(instant))) == (start, end)


def test_interval_and_retention_wording():
    assert Interval.parse("12 hours") == Interval(12, "hour")
    for bad in ("1 week", "0 days", "day", "1day", " 1 day"):
        with pytest.raises(ValueError, match="must look like"):
            Interval.parse(bad)
    assert retention("90 days") == timedelta(days=90)
    with pytest.raises(ValueError):
        retention("3 months")


def test_a_batch_needs_a_partition_per_interval_its_hours_fall_in_and_no_more():
    day = Interval.parse("1 day")
    hours = [at(2026, 11, 27, h) for h in (0, 5, 23)] + [at(2026, 11, 29, 1), at(2026, 11, 29, 1)]
    existing = [Range(at(2026, 11, 28), at(2026, 11, 29))]
    assert needed(hours + [at(2026, 11, 28, 3)], existing, day) == [
        Range(at(2026, 11, 27), at(2026, 11, 28)),
        Range(at(2026, 11, 29), at(2026, 11, 30)),
    ]
    assert needed([at(2026, 11, 28, 3)], existing, day) == []


def test_a_new_interval_is_cut_around_partitions_made_under_the_old_one():
    month = Interval.parse("1 month")
    existing = [Range(at(2026, 11, 27), at(2026, 11, 28))]  # a day partition, before the declaration said months
    assert needed([at(2026, 11, 15, 4), at(2026, 11, 29, 6)], existing, month) == [
        Range(at(2026, 11, 1), at(2026, 11, 27)),
        Range(at(2026, 11, 28), at(2026, 12, 1)),
    ]


def test_partition_names_carry_the_start_as_the_unit_writes_it():
    day, hours, month = Interval.parse("1 day"), Interval.parse("6 hours"), Interval.parse("1 month")
    assert partition_name("orders", Range(at(2026, 11, 27), at(2026, 11, 28)), day, []) == "orders_p20261127"
    assert partition_name("orders", Range(at(2026, 11, 27, 6), at(2026, 11, 27, 12)), hours, []) == "orders_p2026112706"
    assert partition_name("orders", Range(at(2026, 11, 1), at(2026, 12, 1)), month, []) == "orders_p202611"
    cut = Range(at(2026, 11, 28), at(2026, 12, 1))
    assert partition_name("orders", cut, month, []) == "orders_p20261128000000"
    taken = ["orders_p20261127", "orders_p20261127_1"]
    assert partition_name("orders", Range(at(2026, 11, 27), at(2026, 11, 28)), day, taken) == "orders_p20261127_2"


def test_retention_drops_partitions_wholly_older_than_it():
    parts = [
        ("old", Range(at(2026, 8, 27), at(2026, 8, 28))),
        ("edge", Range(at(2026, 8, 28), at(2026, 8, 29))),  # its last instant 90 days before now
        ("kept", Range(at(2026, 8, 29), at(2026, 8, 30))),
    ]
    assert [name for name, _ in expired(parts, at(2026, 11, 27), timedelta(days=90))] == ["old", "edge"]


@pytest.mark.parametrize("interval", ["3 days", "7 days", "1000 hours", "5 months"])
def test_an_interval_that_would_start_before_the_year_1_starts_at_the_first_instant(interval):
    parsed = Interval.parse(interval)
    first = datetime.min.replace(tzinfo=timezone.utc)
    assert parsed.start(at(1, 1, 1)) == first
    [part] = needed([at(1, 1, 1)], [], parsed)
    assert part.low == first and part.high > at(1, 1, 1)
