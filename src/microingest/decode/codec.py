"""Record value decoding: JSON bytes -> a tuple of typed values in declared schema order.

Pure Python so it runs identically on Spark executors and in unit tests. Errors say which field and why, because
the message reaches an on-call engineer (and, from the dead-letter work onwards, the DLQ table).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from microingest.declare.pipeline import Field
from microingest.decode import storable, timestamps


class DecodeError(ValueError):
    """`error_class` is a stable short name for the kind of problem (a column of the dead-letter table)."""

    def __init__(self, error_class: str, message: str):
        self.error_class = error_class
        super().__init__(message)


def decode_json(value: bytes | memoryview | None, schema: Sequence[Field]) -> tuple[Any, ...]:
    if value is None:
        raise DecodeError("tombstone", "value is null (tombstone)")
    try:
        text = bytes(value).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("invalid_utf8", f"value is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    try:
        doc = json.loads(text, parse_float=Decimal, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        raise DecodeError(
            "invalid_json", f"value is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise DecodeError("invalid_json", "value is JSON nested too deeply to decode") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (4,300)
        raise DecodeError("invalid_json", f"value could not be decoded as JSON: {exc}") from None
    except InvalidOperation:  # a number whose exponent Decimal cannot hold (from about 10**18: 0e1000000000000000000)
        raise DecodeError("invalid_json", "value holds a number whose exponent is out of range") from None
    if not isinstance(doc, dict):
        raise DecodeError("not_an_object", f"value must be a JSON object, got {type(doc).__name__}")
    return fields_from_object(doc, schema)


def fields_from_object(doc: dict, schema: Sequence[Field]) -> tuple[Any, ...]:
    """The schema's fields of a decoded object, typed, in schema order; extra fields are ignored."""
    return tuple(_field(doc, f) for f in schema)


def _field(doc: dict, field: Field) -> Any:
    raw = doc.get(field.name)
    if raw is None:
        if field.required:
            raise DecodeError(
                "missing_field", f"field '{field.name}' is required but {'null' if field.name in doc else 'missing'}"
            )
        return None
    try:
        return _CONVERTERS[field.type](raw)
    except storable.Unstorable as exc:
        raise DecodeError("unstorable", f"field '{field.name}' ({field.type}): {exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise DecodeError("wrong_type", f"field '{field.name}' ({field.type}): {exc}") from None


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {type(v).__name__}")
    return storable.text(v)


def _json_int(token: str) -> int | float:
    # JSON's -0 is negative zero, as Arrow's reader and Postgres' float8 read it; Python's int() would drop the sign.
    return -0.0 if token == "-0" else int(token)


def _integer(v: Any) -> int:
    """Exactly the number's value, or refused: 9007199254740993.0 is that integer, 12345678901234567.89 none."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise TypeError(f"expected an integer, got {type(v).__name__}")
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


def _double(v: Any) -> float:
    """The nearest double (a JSON number's text, or an exact decimal, rounded once)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)):
        raise TypeError(f"expected a number, got {type(v).__name__}")
    return storable.double(float(v))


def _boolean(v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"expected true or false, got {type(v).__name__}")
    return v


def _timestamp(v: Any) -> datetime:
    """ISO-8601 text (naive means UTC) or epoch milliseconds, Kafka's own convention; a binary format's own
    timestamp (Avro's timestamp-millis and -micros) as its decoder gives it."""
    if isinstance(v, datetime):
        return storable.timestamp(v)
    if isinstance(v, bool):
        raise TypeError("expected an ISO-8601 string or epoch milliseconds, got bool")
    if isinstance(v, (int, float, Decimal)):
        return timestamps.from_epoch_millis(v)
    if not isinstance(v, str):
        raise TypeError(f"expected an ISO-8601 string or epoch milliseconds, got {type(v).__name__}")
    return timestamps.from_iso(v)


_CONVERTERS = {"string": _string, "integer": _integer, "double": _double, "boolean": _boolean, "timestamp": _timestamp}

PG_TYPES = {
    "string": "text",
    "integer": "bigint",
    "double": "double precision",
    "boolean": "boolean",
    "timestamp": "timestamptz",
}


def copy_text_row(values: Sequence[Any]) -> str:
    """One line of Postgres COPY text format (bytes become bytea hex, dicts and lists jsonb)."""
    return "\t".join(_copy_text(v) for v in values) + "\n"


def _copy_text(v: Any) -> str:
    # Text and integers are most of every row: test their exact types first, and escape only text that needs it.
    kind = type(v)
    if kind is str:
        return _escaped(v) if _NEEDS_ESCAPE(v) else v
    if kind is int:
        return str(v)
    if v is None:
        return r"\N"
    if isinstance(v, bool):
        return "t" if v else "f"
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "\\\\x" + bytes(v).hex()
    return _escaped(json.dumps(v) if isinstance(v, (dict, list)) else str(v))


_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]").search


def _escaped(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
