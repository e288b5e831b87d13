"""Timestamps land on the exact microsecond: epoch milliseconds by integer arithmetic, ISO text as Postgres reads
it (tests/integration/decode/test_timestamps_postgres.py holds the same texts against a real server)."""

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from microingest.decode.storable import Unstorable
from microingest.decode.timestamps import from_epoch_millis, from_iso

UTC = timezone.utc


@pytest.mark.parametrize(
    "ms, expected",
    [
        (253402300799999, datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),  # "end of time"
        (-62135596800000, datetime(1, 1, 1, tzinfo=UTC)),
        (-1, datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)),
        (4102444800123, datetime(2100, 1, 1, 0, 0, 0, 123000, tzinfo=UTC)),
        (Decimal("1700000000000.0005"), datetime(2023, 11, 14, 22, 13, 20, 0, tzinfo=UTC)),  # a tie: to even
        (Decimal("1700000000000.0015"), datetime(2023, 11, 14, 22, 13, 20, 2, tzinfo=UTC)),
        (Decimal("1700000000000.0014999999999999999999999999999"), datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=UTC)),
        (1.5, datetime(1970, 1, 1, 0, 0, 0, 1500, tzinfo=UTC)),
        (Decimal("-0.0"), datetime(1970, 1, 1, tzinfo=UTC)),
        (Decimal("1e-999999999"), datetime(1970, 1, 1, tzinfo=UTC)),
    ],
)
def test_epoch_millis_are_exact(ms, expected):
    assert from_epoch_millis(ms) == expected


def test_every_millisecond_of_the_far_years_is_exact():
    """Where a float division went wrong by microseconds: every value outside 1843-2096 tried here is exact."""
    for ms in range(253402300799999, 253402300799999 - 50_000, -997):
        assert from_epoch_millis(ms) == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)


@pytest.mark.parametrize(
    "ms", [253402300800000, -62135596800001, 2**70, Decimal("1e19"), Decimal("1e999999999"), float("inf"), float("nan")]
)
def test_epoch_millis_beyond_the_years_1_to_9999_are_unstorable(ms):
    with pytest.raises(Unstorable):
        from_epoch_millis(ms)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2024-01-01T00:00:00.1234565Z", datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),  # rint on the double
        ("2024-01-01T00:00:00.1234567Z", datetime(2024, 1, 1, 0, 0, 0, 123457, tzinfo=UTC)),  # rounded, not truncated
        ("2024-01-01T00:00:00.9999995", datetime(2024, 1, 1, 0, 0, 1, tzinfo=UTC)),
        ("2024-12-31T23:59:59.99999999+01:00", datetime(2024, 12, 31, 23, 0, 0, tzinfo=UTC)),
        ("2016-12-31T23:59:60Z", datetime(2017, 1, 1, tzinfo=UTC)),  # a leap second: the next minute's first instant
        ("2016-12-31T23:59:60.0000001Z", datetime(2017, 1, 1, tzinfo=UTC)),  # no fraction left once rounded
        ("2016-12-31T10:15:60.5Z", datetime(2016, 12, 31, 10, 16, 0, 500000, tzinfo=UTC)),
        ("2024-02-28T24:00:00", datetime(2024, 2, 29, tzinfo=UTC)),  # the next day's midnight
        ("2024-02-28 24:00:00.000+00:00", datetime(2024, 2, 29, tzinfo=UTC)),
        ("2024-01-01T10:00:00", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01", datetime(2024, 1, 1, tzinfo=UTC)),
    ],
)
def test_iso_text_is_read_as_postgres_reads_it(text, expected):
    assert from_iso(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "2016-12-31T23:59:60.5Z",
        "2016-12-31T23:59:60.9999999Z",
        "2024-01-01T24:00:01",
        "2024-01-01T24:01:00",
        "2024-01-01T23:59:61",
        "2024-01-01T24:00:00.5",
        "2024-01-01T23:60:00",
        "yesterday",
    ],
)
def test_times_postgres_refuses_are_refused(text):
    with pytest.raises(ValueError):
        from_iso(text)


def test_the_last_instant_cannot_roll_past_the_year_9999():
    with pytest.raises(Unstorable):
        from_iso("9999-12-31T24:00:00Z")
