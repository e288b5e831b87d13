"""A declared `timestamp` from epoch milliseconds or ISO-8601 text: the exact instant, as Postgres would read it.

- Epoch milliseconds by integer arithmetic: 253402300799999 is 9999-12-31T23:59:59.999Z (a float division made it
  …59.998993). A number with a fraction of a millisecond is rounded to the microsecond, ties to even.
- ISO-8601 text by Python's `fromisoformat`, plus three things Postgres does and Python does not, so that a value
  lands as `'...'::timestamptz` would store it: more than six fractional digits are rounded to the microsecond as
  Postgres rounds them (`rint(fraction * 1e6)` on the double, ties to even), not truncated; a leap second (`:60`)
  is the first instant of the next minute; `24:00:00` is the next day's midnight. As in Postgres, the time of day
  may reach 24:00:00 but not pass it: `23:59:60.5`, `24:00:01` and `23:59:61` are refused.

Either way the instant must lie in UTC between the years 1 and 9999 (`storable.timestamp`), else `Unstorable`.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

from microingest.decode import storable

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
# The extended time of day after the date and its separator: hours, minutes, seconds, the fraction's digits.
_TIME_OF_DAY = re.compile(
    r"(?P<head>.+?[T ])(?P<h>\d\d):(?P<m>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d+))?(?P<tail>.*)", re.DOTALL
)


def from_epoch_millis(value: int | float | Decimal) -> datetime:
    """An integer exactly; a float or a JSON number's exact decimal rounded once, to the microsecond."""
    if isinstance(value, int):
        micros = value * 1000
    else:
        exact = Decimal(value)
        if not exact.is_finite() or (not exact.is_zero() and exact.adjusted() > 18):
            raise storable.Unstorable(f"epoch milliseconds {value} are not a time between the years 1 and 9999")
        # Fractions round exactly, ties to even; under 1e-30 ms (a Fraction of 10**huge) the instant is the epoch.
        micros = 0 if exact.adjusted() < -30 else round(Fraction(exact) * 1000)
    try:
        return EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        raise storable.Unstorable(f"epoch milliseconds {value} are not a time between the years 1 and 9999") from None


def from_iso(text: str) -> datetime:
    """ValueError (Python's own words) for text that is no ISO-8601 time."""
    match = _TIME_OF_DAY.fullmatch(text)
    if match is None:
        return storable.timestamp(datetime.fromisoformat(text))
    hours, minutes, seconds = int(match["h"]), int(match["m"]), int(match["s"])
    micros = _fraction_micros(match["frac"] or "")
    if hours > 24 or minutes > 59 or seconds > 60 or (hours == 24 and (minutes or seconds or micros)):
        raise ValueError(f"{match['h']}:{match['m']}:{match['s']} is no time of day")
    into_day = ((hours * 60 + minutes) * 60 + seconds) * MICROS_PER_SECOND + micros
    if into_day > MICROS_PER_DAY:  # 23:59:60.5: a leap second ends the day, it does not reach past it
        raise ValueError(f"{text} is past the end of its day")
    midnight = storable.timestamp(datetime.fromisoformat(f"{match['head']}00:00:00{match['tail']}"))
    try:
        return midnight + timedelta(microseconds=into_day)
    except OverflowError:
        raise storable.Unstorable(f"{text} is outside the years 1 to 9999 in UTC") from None


def _fraction_micros(digits: str) -> int:
    if len(digits) <= 6:
        return int(digits.ljust(6, "0"))
    return round(float("0." + digits) * MICROS_PER_SECOND)  # Python's round is rint's: ties to even
