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
from microingest.decode import storable
from microingest.decode.converters import convert


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
        doc = read_json(text)
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


def read_json(text: str) -> Any:
    """JSON text as the reference decoder reads it: numbers exact (int and Decimal, JSON's -0 kept)."""
    return json.loads(text, parse_float=Decimal, parse_int=_json_int)


def fields_from_object(doc: dict, schema: Sequence[Field]) -> tuple[Any, ...]:
    """The schema's fields of a decoded object, typed, in schema order; extra fields are ignored."""
    return tuple(_field(doc, f) for f in schema)


def _field(doc: dict, field: Field) -> Any:
    raw = _found(doc, field)
    if raw is _ABSENT or raw is None:
        if field.required:
            raise DecodeError(
                "missing_field", f"field {_named(field)} is required but {'missing' if raw is _ABSENT else 'null'}"
            )
        return None
    try:
        return convert(field, raw)
    except storable.Unstorable as exc:
        raise DecodeError("unstorable", f"field {_named(field)} ({field.shown()}): {exc}") from None
    except (TypeError, ValueError, OverflowError) as exc:
        raise DecodeError("wrong_type", f"field {_named(field)} ({field.shown()}): {exc}") from None


_ABSENT = object()
_INDEX = re.compile(r"[0-9]+").fullmatch  # an array's index: ASCII digits (str.isdigit takes ² too)


def _found(doc: dict, field: Field) -> Any:
    """The value at the field's path: _ABSENT when a name along it is missing, None when one is null."""
    node: Any = doc
    for depth, step in enumerate(field.at):
        if node is None:
            return None
        if isinstance(node, dict):
            node = node.get(step, _ABSENT)
        elif isinstance(node, list) and _INDEX(step):
            node = node[int(step)] if int(step) < len(node) else _ABSENT
        else:
            where = ".".join(field.at[:depth]) or "the value"
            wanted = "an object or array" if _INDEX(step) else "an object"
            raise DecodeError(
                "wrong_type", f"field {_named(field)} ({field.shown()}): {where} is {type(node).__name__}, not {wanted}"
            )
        if node is _ABSENT:
            return _ABSENT
    return node


def _named(field: Field) -> str:
    return f"'{field.name}'" + (f" (at {'.'.join(field.path)})" if field.path else "")


def _json_int(token: str) -> int | float:
    # JSON's -0 is negative zero, as Arrow's reader and Postgres' float8 read it; Python's int() would drop the sign.
    return -0.0 if token == "-0" else int(token)


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
