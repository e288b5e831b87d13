"""A registered writer schema -> the declaration's schema fields that read it (no I/O: `registry_schema` fetches).

Each field the decoders can read into a declared type becomes one; the others (arrays, maps, bytes, nested records and
messages, unions of several types) are left out, each with the reason, for `microingest schema` to show. A schema with
no fields to take (not a record, message or object) is a ValueError.

- Avro: string, enum, uuid -> string; int, long -> integer; float, double, decimal -> double; boolean;
  timestamp-millis/-micros -> timestamp. Required unless the field is a union with null or has a default.
- Protobuf (the file's first message): string, enum -> string; the integer kinds -> integer; float, double -> double;
  bool -> boolean; google.protobuf.Timestamp -> timestamp; the wrapper types -> their value's type. Never required:
  Protobuf has no required fields since proto3.
- JSON Schema: string (date-time format -> timestamp), integer, number -> double, boolean; required as listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

_AVRO = {
    "string": "string",
    "enum": "string",
    "int": "integer",
    "long": "integer",
    "float": "double",
    "double": "double",
    "boolean": "boolean",
}
_AVRO_LOGICAL = {
    "timestamp-millis": "timestamp",
    "timestamp-micros": "timestamp",
    "uuid": "string",
    "decimal": "double",
}
_PROTO = {
    F.TYPE_STRING: "string",
    F.TYPE_ENUM: "string",
    F.TYPE_BOOL: "boolean",
    F.TYPE_FLOAT: "double",
    F.TYPE_DOUBLE: "double",
    **{
        t: "integer"
        for t in (
            F.TYPE_INT32,
            F.TYPE_INT64,
            F.TYPE_UINT32,
            F.TYPE_UINT64,
            F.TYPE_SINT32,
            F.TYPE_SINT64,
            F.TYPE_FIXED32,
            F.TYPE_FIXED64,
            F.TYPE_SFIXED32,
            F.TYPE_SFIXED64,
        )
    },
}
_PROTO_MESSAGES = {
    ".google.protobuf.Timestamp": "timestamp",
    **{
        f".google.protobuf.{kind}Value": type_
        for kind, type_ in (
            ("Double", "double"),
            ("Float", "double"),
            ("Int64", "integer"),
            ("UInt64", "integer"),
            ("Int32", "integer"),
            ("UInt32", "integer"),
            ("Bool", "boolean"),
            ("String", "string"),
        )
    },
}
_JSON = {"string": "string", "integer": "integer", "number": "double", "boolean": "boolean"}


@dataclass(frozen=True)
class Derived:
    fields: dict[str, dict[str, Any]]  # as a declaration writes them: name -> {type, required}
    left_out: dict[str, str]  # name -> why


def avro_fields(schema: Any) -> Derived:
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError("the Avro schema is not a record")
    fields, left_out = {}, {}
    for field in schema.get("fields", []):
        kind, nullable = field["type"], False
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            nullable = len(others) < len(kind)
            kind = others[0] if len(others) == 1 else kind
        type_ = _avro_type(kind)
        if type_ is None:
            left_out[field["name"]] = f"Avro type {_shown(kind)} has no declared type"
        else:
            fields[field["name"]] = {"type": type_, "required": not nullable and "default" not in field}
    return Derived(fields, left_out)


def _avro_type(kind: Any) -> str | None:
    if isinstance(kind, dict):
        logical = kind.get("logicalType")
        if logical in _AVRO_LOGICAL:
            return _AVRO_LOGICAL[logical]
        name = kind.get("type")
        if name == "enum":
            return "string"
        return _AVRO.get(name) if isinstance(name, str) and not logical else None
    return _AVRO.get(kind) if isinstance(kind, str) else None


def protobuf_fields(file) -> Derived:
    """`file`: a FileDescriptorProto; its first message is the one a value's default message index names."""
    if not file.message_type:
        raise ValueError("the Protobuf schema declares no message")
    fields, left_out = {}, {}
    for field in file.message_type[0].field:
        if field.label == F.LABEL_REPEATED:
            left_out[field.name] = "repeated (or a map) has no declared type"
            continue
        type_ = _PROTO.get(field.type) or _PROTO_MESSAGES.get(field.type_name)
        if type_ is None:
            left_out[field.name] = f"Protobuf type {field.type_name or F.Type.Name(field.type)} has no declared type"
        else:
            fields[field.name] = {"type": type_, "required": False}
    return Derived(fields, left_out)


def json_schema_fields(schema: Any) -> Derived:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise ValueError("the JSON Schema has no properties")
    required = set(schema.get("required") or ())
    fields, left_out = {}, {}
    for name, spec in schema["properties"].items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        nullable = isinstance(kind, list) and "null" in kind
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            kind = others[0] if len(others) == 1 else None
        type_ = (
            "timestamp"
            if kind == "string" and spec.get("format") == "date-time"
            else _JSON.get(kind)
            if isinstance(kind, str)
            else None
        )
        if type_ is None:
            left_out[name] = (
                f"JSON type {_shown(spec.get('type') if isinstance(spec, dict) else spec)} has no declared type"
            )
        else:
            fields[name] = {"type": type_, "required": name in required and not nullable}
    return Derived(fields, left_out)


def _shown(kind: Any) -> str:
    if isinstance(kind, dict):
        return str(kind.get("logicalType") or kind.get("type"))
    return str(kind)
