"""What Postgres can store: the rules a staged value meets before it reaches COPY.

A value that breaks them would fail the COPY, and with it the whole batch on every retry (a poison record). The
decoder (`codec`) holds every field to these rules and makes a record that breaks one a dead letter naming the
field; the texts of the dead letter itself (its reason, its headers) and the record key are made storable here
without losing anything. The rules are those of a UTF8 database, the only kind the platform takes:

- text: no NUL (Postgres text cannot hold one) and no lone surrogate (Python can hold one, UTF-8 cannot);
- integer: 64 bits (bigint); double: finite (the declared columns have no room for NaN or infinities);
- timestamp: in UTC between the years 1 and 9999, where Python, Arrow's CSV writer and Postgres all agree (an
  offset can move a year-1 time to year 0, which Postgres refuses as written).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# The storable instants as microseconds since the epoch: 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z.
MIN_EPOCH_MICROS, MAX_EPOCH_MICROS = -62_135_596_800_000_000, 253_402_300_799_999_999
# The record key's escaped form: Postgres' own bytea hex notation, so `decode(substr(record_key, 3), 'hex')` gives
# the key's bytes back.
KEY_HEX_PREFIX = "\\x"


class Unstorable(ValueError):
    """A value Postgres would refuse; the message says why, in words fit for a dead letter's reason."""


def text(value: str) -> str:
    if "\x00" in value:
        raise Unstorable("contains a NUL character, which Postgres text cannot store")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise Unstorable(
                f"contains a lone surrogate (U+{ord(value[exc.start]):04X} at character {exc.start}), "
                "which UTF-8 cannot encode"
            ) from None
    return value


def integer(value: int) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise Unstorable(f"{value} does not fit in 64 bits")
    return value


def double(value: float) -> float:
    if not math.isfinite(value):
        raise Unstorable(f"expected a finite number, got {value}")
    return value


def timestamp(value: datetime) -> datetime:
    """The instant in UTC (naive means UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    try:
        return value.astimezone(timezone.utc)
    except OverflowError:
        raise Unstorable(f"{value.isoformat()} is outside the years 1 to 9999 in UTC") from None


def key_text(key: bytes) -> str:
    """The record key as it is staged: its text when that is storable and cannot be mistaken for the escaped form,
    else `\\x` and its bytes in hex (Kafka's IntegerSerializer keys, say). One-to-one: no two keys share a form."""
    try:
        decoded = key.decode("utf-8")
    except UnicodeDecodeError:
        return KEY_HEX_PREFIX + key.hex()
    if "\x00" in decoded or decoded.startswith(KEY_HEX_PREFIX):
        return KEY_HEX_PREFIX + key.hex()
    return decoded


def message(value: str) -> str:
    """Free text (a reason quoting the record, a user transform's exception) made storable and still readable: NUL
    and lone surrogates are written as Python escapes."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    return value.encode("utf-8", "backslashreplace").decode("utf-8")
