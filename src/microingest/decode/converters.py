"""A decoded value (from JSON, Avro or Protobuf, or a transform's output) -> the declared type's value, exactly, or
an error saying why it is not one.

Each converter takes what any format's decoder gives (JSON's numbers arrive as int or Decimal, never through a
float) and returns the value in the form every later step takes: `str`, `int`, `float`, `bool`, an aware
`datetime`, `Decimal` at the declared scale, `date`, `uuid.UUID`, `bytes`, a JSON value (`json_text` writes it), a
list. Converting a converted value gives it back unchanged, so a transform's output goes through the same rules.

TypeError or ValueError: not a value of the type (a `wrong_type` dead letter); `storable.Unstorable`: a value of the
type that Postgres could not store (an `unstorable` one).
"""

from __future__ import annotations

import base64
import binascii
import re
import uuid
from collections.abc import Callable
from datetime import date, datetime
from decimal import ROUND_HALF_EVEN, Context, Decimal
from typing import Any

from microingest.declare.pipeline import Field
from microingest.decode import json_values, storable, timestamps

_DECIMAL_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,6})?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}(-?)[0-9a-fA-F]{4}\1[0-9a-fA-F]{4}\1[0-9a-fA-F]{4}\1[0-9a-fA-F]{12}")
_BASE64 = re.compile(rb"[A-Za-z0-9+/]*={0,2}")


def convert(field: Field, value: Any) -> Any:
    """`value` (not None) as `field` declares it."""
    if field.type == "array":
        return _array(field, value)
    return _SCALARS[field.type](field, value)


def _kind(value: Any) -> str:
    return type(value).__name__


def _string(field: Field, v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {_kind(v)}")
    return storable.text(v)


def _integer(field: Field, v: Any) -> int:
    """Exactly the number's value, or refused: 9007199254740993.0 is that integer, 12345678901234567.89 none."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise TypeError(f"expected an integer, got {_kind(v)}")
    if isinstance(v, int):
        return storable.integer(v)
    exact = Decimal(v)  # a float's own value, exactly
    if not exact.is_finite():
        raise ValueError(f"expected an integer, got {v}")
    if not exact.is_zero() and exact.adjusted() > 100:  # before int(): 1e999999999 would take gigabytes
        raise storable.Unstorable(f"{v} does not fit in 64 bits")
    if exact != exact.to_integral_value():
        raise ValueError(f"expected an integer, got {v}")
    return storable.integer(int(exact))


def _double(field: Field, v: Any) -> float:
    """The nearest double (a JSON number's text, or an exact decimal, rounded once)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise TypeError(f"expected a number, got {_kind(v)}")
    return storable.double(float(v))


def _boolean(field: Field, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected true or false, got {_kind(v)}")
    return v


def _timestamp(field: Field, v: Any) -> datetime:
    """ISO-8601 text (naive means UTC) or epoch milliseconds, Kafka's own convention; a binary format's own
    timestamp (Avro's timestamp-millis and -micros, Protobuf's Timestamp) as its decoder gives it."""
    if isinstance(v, datetime):
        return storable.timestamp(v)
    if isinstance(v, bool):
        raise TypeError("expected an ISO-8601 string or epoch milliseconds, got bool")
    if isinstance(v, (int, float, Decimal)):
        return timestamps.from_epoch_millis(v)
    if not isinstance(v, str):
        raise TypeError(f"expected an ISO-8601 string or epoch milliseconds, got {_kind(v)}")
    return timestamps.from_iso(v)


def _decimal(field: Field, v: Any) -> Decimal:
    """A number (JSON's text read exactly; a float at its exact binary value) or decimal text, at the declared scale:
    more digits after the point are refused, or rounded half to even when the declaration says so; more digits
    before it than precision less scale are refused."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal, str)):
        raise TypeError(f"expected a decimal number or decimal text, got {_kind(v)}")
    if isinstance(v, str):
        if not _DECIMAL_TEXT.fullmatch(v):
            raise ValueError(f"expected decimal text such as 1234.50, got {_shown(v)}")
        v = Decimal(v)
    exact = Decimal(v)
    if not exact.is_finite():
        raise ValueError(f"expected a finite number, got {v}")
    return fit_decimal(exact, field)


def fit_decimal(exact: Decimal, field: Field) -> Decimal:
    precision, scale = field.precision or 0, field.scale or 0
    whole = precision - scale
    said = f"decimal({precision},{scale}) holds {whole} digit(s) before the point and {scale} after"
    if not exact.is_zero() and exact.adjusted() >= whole:
        raise ValueError(f"{_number(exact)} has {exact.adjusted() + 1} digit(s) before the point; {said}")
    places = _places(exact)
    if places > scale:
        if field.rounding != "half_even":
            raise ValueError(
                f"{_number(exact)} has {places} digit(s) after the point; {said} "
                "(declare rounding: half_even to round it)"
            )
        if not exact.is_zero() and exact.adjusted() < -scale - 1:  # below half the last place: zero
            exact = Decimal(0)
    context = Context(prec=precision + 2, rounding=ROUND_HALF_EVEN)
    fitted = exact.quantize(Decimal(1).scaleb(-scale), context=context)
    if not fitted.is_zero() and fitted.adjusted() >= whole:  # 999.995 rounded up to 1000.00
        raise ValueError(f"{_number(exact)} rounds to {fitted}, which has too many digits: {said}")
    return fitted.copy_abs() if fitted.is_zero() else fitted  # numeric has no negative zero


def _places(exact: Decimal) -> int:
    """Digits after the point, trailing zeros aside: 1234.500 has 1, 0.000 none."""
    if exact.is_zero():
        return 0
    _, digits, exponent = exact.as_tuple()
    assert isinstance(exponent, int)  # finite
    if exponent >= 0:
        return 0
    kept = len(digits) - len("".join(map(str, digits)).rstrip("0"))
    return max(0, -exponent - kept)


def _date(field: Field, v: Any) -> date:
    """ISO-8601 calendar date text (YYYY-MM-DD), or a format's own date (Avro's date, Protobuf's google.type.Date)."""
    if isinstance(v, datetime):
        raise TypeError("expected a date, got a timestamp")
    if isinstance(v, date):
        return v
    if not isinstance(v, str):
        raise TypeError(f"expected an ISO-8601 date (YYYY-MM-DD), got {_kind(v)}")
    if not _ISO_DATE.fullmatch(v):
        raise ValueError(f"expected an ISO-8601 date (YYYY-MM-DD), got {_shown(v)}")
    return date.fromisoformat(v)


def _uuid(field: Field, v: Any) -> uuid.UUID:
    """Hexadecimal text, with the usual hyphens (8-4-4-4-12) or none."""
    if isinstance(v, uuid.UUID):
        return v
    if not isinstance(v, str):
        raise TypeError(f"expected a UUID as text, got {_kind(v)}")
    if not _UUID_TEXT.fullmatch(v):
        raise ValueError(f"expected a UUID such as 123e4567-e89b-12d3-a456-426614174000, got {_shown(v)}")
    return uuid.UUID(v)


def _bytes(field: Field, v: Any) -> bytes:
    """A format's bytes as they are; text as standard base64 (with its padding), JSON's only way to hold bytes."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    if not isinstance(v, str):
        raise TypeError(f"expected bytes as base64 text, got {_kind(v)}")
    encoded = v.encode("ascii", "replace")
    if len(encoded) % 4 or not _BASE64.fullmatch(encoded):
        raise ValueError(f"expected standard base64 text, got {_shown(v)}")
    try:
        decoded = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"expected standard base64 text: {exc}") from None
    if base64.b64encode(decoded) != encoded:  # "AR==" is "AQ==" with stray bits: two texts for one value
        raise ValueError(f"expected standard base64 text, got {_shown(v)}, whose last character has stray bits")
    return decoded


def _json(field: Field, v: Any) -> Any:
    """Any JSON value, kept whole (a binary format's nested value by `json_values.jsonable`)."""
    return json_values.jsonable(v)


def _array(field: Field, v: Any) -> list:
    if not isinstance(v, (list, tuple)):
        raise TypeError(f"expected an array, got {_kind(v)}")
    item = _SCALARS[field.kind]
    out = []
    for i, element in enumerate(v):
        try:
            out.append(None if element is None else item(field, element))
        except (TypeError, ValueError) as exc:  # Unstorable too: its kind is kept, its words gain the place
            kind = storable.Unstorable if isinstance(exc, storable.Unstorable) else type(exc)
            if kind not in (storable.Unstorable, TypeError):
                kind = ValueError
            raise kind(f"element {i}: {exc}") from None
    return out


def _shown(text: str) -> str:
    return repr(text) if len(text) <= 40 else repr(text[:40]) + "..."


def _number(exact: Decimal) -> str:
    shown = str(exact)
    return shown if len(shown) <= 40 else f"{shown[:20]}...{shown[-10:]}"


_SCALARS: dict[str, Callable[[Field, Any], Any]] = {
    "string": _string,
    "integer": _integer,
    "double": _double,
    "boolean": _boolean,
    "timestamp": _timestamp,
    "decimal": _decimal,
    "date": _date,
    "uuid": _uuid,
    "bytes": _bytes,
    "json": _json,
}
