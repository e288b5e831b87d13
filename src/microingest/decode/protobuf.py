"""Protobuf values in the Confluent wire format -> the declared fields of the writer's message.

After the frame's schema id come the message's indexes (which message of the schema's file, nested how deep), then
the message. The writer schema is the file the registry holds with its imports, built into a descriptor
(systems/protobuf_schemas.py). The declared fields are taken by name with Protobuf's own rules: a field the
writer's version lacks, or one with presence that is unset, is null; a scalar without presence reads as its default
(0, ""); enums read as their names, google.protobuf.Timestamp as a timestamp, the wrapper types as their value,
google.type.Date as a date (when whole: year, month and day set), confluent.type.Decimal and google.type.Decimal
(when its value is decimal text) as their exact number; other messages as dicts of their fields, which a declared
field's path reaches into and a json field keeps whole, maps as dicts with text keys, repeated fields as lists.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date, timezone
from decimal import Decimal
from typing import Any

from microingest.decode.codec import DecodeError
from microingest.decode.registered import UNDECODABLE, framed
from microingest.systems.protobuf_schemas import writer_file

# google.type.Decimal's value: decimal text with an optional exponent (its own definition is looser; the rest of it
# stays a message, which no decimal field takes).
_DECIMAL_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d{1,6})?")
_CLASSES: dict[tuple[str, int, tuple[int, ...]], Any] = {}
_WRAPPERS = {
    f"google.protobuf.{n}Value"
    for n in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
}


def message_indexes(payload: memoryview) -> tuple[tuple[int, ...], memoryview]:
    """The message indexes (zigzag varints: a count, then the path; a single 0 means the first message) and the
    message's bytes after them."""
    count, at = _zigzag(payload, 0)
    if count == 0:
        return (0,), payload[at:]
    if count < 0 or count > 64:
        raise DecodeError(UNDECODABLE, f"message indexes count {count} is not a message path")
    path = []
    for _ in range(count):
        index, at = _zigzag(payload, at)
        path.append(index)
    return tuple(path), payload[at:]


def _zigzag(data: memoryview, at: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        if at >= len(data) or shift > 63:
            raise DecodeError(UNDECODABLE, "the message indexes end before the message")
        byte = data[at]
        raw |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), at


def decode_protobuf(value: bytes, registry: dict[str, str], names: Sequence[str]) -> dict[str, Any]:
    """The named fields of the writer's message (the first step of each declared field's path)."""
    message, schema_id = decode_protobuf_message(value, registry)
    try:
        return {name: _value(message, name) for name in names}
    except (ValueError, OverflowError) as exc:  # e.g. a Timestamp beyond the years 1 to 9999
        raise DecodeError(
            UNDECODABLE,
            f"the Protobuf message {message.DESCRIPTOR.full_name} of writer schema id "
            f"{schema_id} holds a value out of range: {exc}",
        ) from None


def decode_protobuf_message(value: bytes, registry: dict[str, str], part: str = "value") -> tuple[Any, int]:
    """(the writer's message, the writer schema's id) of a framed value or key."""
    schema_id, payload, schema = framed(value, registry, "PROTOBUF", part)
    path, body = message_indexes(payload)
    message = message_class(registry, schema_id, schema, path)()
    try:
        message.ParseFromString(bytes(body))
    except Exception as exc:  # a DecodeError of protobuf's: the same bytes fail the same way on every retry
        raise DecodeError(
            UNDECODABLE,
            f"{part} does not decode as the Protobuf message {message.DESCRIPTOR.full_name} "
            f"of writer schema id {schema_id}: {exc}",
        ) from None
    return message, schema_id


def _value(message, name: str) -> Any:
    field = message.DESCRIPTOR.fields_by_name.get(name)
    return None if field is None else field_value(message, field)


def field_value(message, field) -> Any:
    """A field of a message as plain Python: a message a dict of its fields (but the well-known kinds below), a map a
    dict with text keys, a repeated field a list; unset with presence, None."""
    raw = getattr(message, field.name)
    if field.is_repeated:
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            values = entry.fields_by_name["value"]
            return {_map_key(key): _single(values, item) for key, item in raw.items()}
        return [_single(field, item) for item in raw]
    if field.has_presence and not message.HasField(field.name):
        return None
    return _single(field, raw)


def _single(field, raw) -> Any:
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(raw)
        return known.name if known is not None else raw
    if field.message_type is None:
        return raw
    kind = field.message_type.full_name
    try:
        if kind == "google.protobuf.Timestamp":
            return raw.ToDatetime(tzinfo=timezone.utc)
        if kind == "google.type.Date" and raw.year and raw.month and raw.day:  # a partial date stays a message
            return date(raw.year, raw.month, raw.day)
    except (ValueError, OverflowError):  # no instant or day (beyond the years 1 to 9999, February 30th): its fields
        pass
    if kind in _WRAPPERS:
        return raw.value
    if kind == "google.type.Decimal" and _DECIMAL_TEXT.fullmatch(raw.value):
        return Decimal(raw.value)
    if kind == "confluent.type.Decimal":  # the unscaled value in big-endian two's complement, and the scale
        return Decimal(f"{int.from_bytes(raw.value, 'big', signed=True)}E{-raw.scale}")
    return {inner.name: field_value(raw, inner) for inner in raw.DESCRIPTOR.fields}


def _map_key(key: Any) -> str:
    return ("true" if key else "false") if isinstance(key, bool) else str(key)


def message_class(registry: dict[str, str], schema_id: int, schema, path: tuple[int, ...]):
    key = (registry["url"], schema_id, path)
    if key not in _CLASSES:
        from google.protobuf import message_factory

        file, proto = writer_file(registry, schema_id, schema)
        try:
            if min(path) < 0:
                raise IndexError(path)
            descriptor = file.message_types_by_name[proto.message_type[path[0]].name]
            for index in path[1:]:
                descriptor = descriptor.nested_types[index]
        except (IndexError, TypeError, OverflowError):  # beyond the file's messages, or no index at all
            raise DecodeError(
                UNDECODABLE, f"message indexes {list(path)} name no message of writer schema id {schema_id}"
            ) from None
        _CLASSES[key] = message_factory.GetMessageClass(descriptor)
    return _CLASSES[key]
