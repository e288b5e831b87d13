"""Protobuf values in the Confluent wire format -> the declared fields of the writer's message.

After the frame's schema id come the message's indexes (which message of the schema's file, nested how deep), then
the message. The writer schema is the file the registry holds (a serialized FileDescriptorProto, or .proto text that
`proto_files` compiles) with its imports, built into a descriptor pool of its own per schema id, so any number of
versions of one file live side by side. The declared fields are taken by name with Protobuf's own rules: a field the
writer's version lacks, or one with presence that is unset, is null; a scalar without presence reads as its default
(0, ""); enums read as their names, google.protobuf.Timestamp as a timestamp, the wrapper types as their value.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timezone
from typing import Any

from google.protobuf import descriptor_pb2

from microingest.decode.codec import DecodeError
from microingest.decode.proto_files import file_descriptors, from_base64
from microingest.decode.registered import UNDECODABLE, framed
from microingest.systems.schema_registry import UnreadableSchemaError, referenced_schema

_CLASSES: dict[tuple[str, int, tuple[int, ...]], Any] = {}
_FILES: dict[tuple[str, int], Any] = {}
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
    """The declared fields of the writer's message."""
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
    if field is None or field.is_repeated:
        return None if field is None else list(getattr(message, name))  # a list is no declared type: wrong_type
    if field.has_presence and not message.HasField(name):
        return None
    raw = getattr(message, name)
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(raw)
        return known.name if known is not None else raw
    if field.message_type is not None:
        kind = field.message_type.full_name
        if kind == "google.protobuf.Timestamp":
            return raw.ToDatetime(tzinfo=timezone.utc)
        if kind in _WRAPPERS:
            return raw.value
    return raw


def message_class(registry: dict[str, str], schema_id: int, schema, path: tuple[int, ...]):
    key = (registry["url"], schema_id, path)
    if key not in _CLASSES:
        from google.protobuf import message_factory

        file, proto = _file(registry, schema_id, schema)
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


def writer_file(registry: dict[str, str], schema_id: int, schema):
    """The FileDescriptorProto of a registered Protobuf schema, its imports resolved."""
    return _file(registry, schema_id, schema)[1]


def _file(registry: dict[str, str], schema_id: int, schema):
    """The writer's file descriptor and its proto (which keeps the messages' order), in a pool of its own beside the
    files producers import without registering them and the schema's references."""
    key = (registry["url"], schema_id)
    if key not in _FILES:
        from confluent_kafka.schema_registry.common.protobuf import _init_pool
        from google.protobuf import descriptor_pool

        main = (
            from_base64(schema.schema_str) or descriptor_pb2.FileDescriptorProto()
        ).name or f"schema_{schema_id}.proto"
        what = f"writer schema id {schema_id}"
        pool = descriptor_pool.DescriptorPool()
        _init_pool(pool)
        files = file_descriptors({main: schema.schema_str, **_references(registry, schema)}, what)
        for proto in files:
            try:
                pool.FindFileByName(proto.name)
                continue  # one of the files the pool starts with
            except KeyError:
                pass
            try:
                pool.AddSerializedFile(proto.SerializeToString())
            except Exception as exc:  # an import none of those provide: not the record's fault
                raise UnreadableSchemaError(
                    f"{what} cannot be built into a descriptor ({proto.name}): {type(exc).__name__}: {exc}"
                ) from None
        _FILES[key] = pool.FindFileByName(main), next(f for f in files if f.name == main)
    return _FILES[key]


def _references(registry: dict[str, str], schema, found: dict[str, str] | None = None) -> dict[str, str]:
    """Import name -> registered schema, of every schema `schema` refers to, however deep."""
    found = {} if found is None else found
    for reference in schema.references or ():
        if reference.name not in found:
            referenced = referenced_schema(registry, reference.subject, reference.version)
            found[reference.name] = referenced.schema_str
            _references(registry, referenced, found)
    return found
