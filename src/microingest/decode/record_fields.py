"""Declared fields from the record itself rather than its value: `{from: key}` and `{from: header, name: ...}`.

- key, string: the key as `key_format` reads it, the text an upsert_latest target is keyed by (`keys`);
  bytes: the key's bytes as they are. A record without a key gives null.
- header, string: the header's value as UTF-8 text; bytes: its bytes. Kafka allows a name more than once: the last
  header of the name counts, as Kafka's own `Headers.lastHeader`. A record without it, or whose header has a null
  value, gives null.

A required field that gives null is a `missing_field` dead letter; a header that is not UTF-8 text for a string field a
`wrong_type` one, and one holding NUL an `unstorable` one, as for a value's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from microingest.declare.pipeline import Field
from microingest.decode import storable
from microingest.decode.codec import DecodeError

Headers = Sequence[tuple[str, bytes | None]]


def record_field(field: Field, key: bytes | None, key_text: str | None, headers: Headers) -> Any:
    if field.source == "key":
        value: Any = key_text if field.type == "string" else key
        where = "the record has no key"
    else:
        value = next((v for name, v in reversed(headers) if name == field.header), None)
        where = f"the record has no header {field.header!r}, or it is null"
        if value is not None and field.type == "string":
            value = _text(field, value)
    if value is None and field.required:
        raise DecodeError("missing_field", f"field '{field.name}' (from {field.source}) is required but {where}")
    return None if value is None else (bytes(value) if field.type == "bytes" else value)


def _text(field: Field, value: bytes) -> str:
    said = f"field '{field.name}' (string, from header {field.header!r})"
    try:
        return storable.text(bytes(value).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DecodeError("wrong_type", f"{said}: not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except storable.Unstorable as exc:
        raise DecodeError("unstorable", f"{said}: {exc}") from None
