"""A registered writer schema -> the declaration's schema fields that read it (no I/O: `registry_schema` fetches).

Each field becomes the declared type that holds its values exactly; where a choice was made (a nested record kept
whole as `json`, say) `chosen` says which and what else a declaration may write, for `microingest schema` to print.
A field no declared type holds (a union of several types, a decimal of more than 38 digits) is left out, with the
reason. A schema with no fields to take (not a record, message or object) is a ValueError.

- Avro: string, enum -> string; int, long -> integer; float, double -> double; boolean; bytes, fixed -> bytes;
  logical types: decimal -> decimal with its precision and scale, date, uuid, timestamp-millis/-micros ->
  timestamp; an array of those scalar types -> an array; records, maps and other arrays -> json. Required unless
  the field is a union with null or has a default.
- Protobuf (the file's first message): string, enum -> string; the integer kinds -> integer; float, double ->
  double; bool -> boolean; bytes; google.protobuf.Timestamp -> timestamp; google.type.Date -> date; the wrapper
  types -> their value's type; a repeated scalar -> an array; other messages, maps and repeated messages -> json.
  Never required: Protobuf has no required fields since proto3. A decimal message (confluent.type.Decimal,
  google.type.Decimal) carries its scale in each value: it is left out for the declaration to give precision and
  scale.
- JSON Schema: string (format date-time -> timestamp, date -> date, uuid -> uuid; contentEncoding base64 -> bytes),
  integer, number -> double, boolean; an array of those -> an array; objects and other arrays -> json; required as
  listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

from microingest.declare.pipeline import ITEM_TYPES, MAX_DECIMAL_PRECISION

_AVRO = {
    "string": "string",
    "enum": "string",
    "int": "integer",
    "long": "integer",
    "float": "double",
    "double": "double",
    "boolean": "boolean",
    "bytes": "bytes",
    "fixed": "bytes",
}
_AVRO_LOGICAL = {
    "timestamp-millis": "timestamp",
    "timestamp-micros": "timestamp",
    "uuid": "uuid",
    "date": "date",
}
_AVRO_WHOLE = ("record", "error", "map", "array")
_PROTO = {
    F.TYPE_STRING: "string",
    F.TYPE_ENUM: "string",
    F.TYPE_BOOL: "boolean",
    F.TYPE_FLOAT: "double",
    F.TYPE_DOUBLE: "double",
    F.TYPE_BYTES: "bytes",
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
    ".google.type.Date": "date",
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
            ("Bytes", "bytes"),
        )
    },
}
_PROTO_DECIMALS = (".confluent.type.Decimal", ".google.type.Decimal")
_JSON = {"string": "string", "integer": "integer", "number": "double", "boolean": "boolean"}
_JSON_FORMATS = {"date-time": "timestamp", "date": "date", "uuid": "uuid"}
_WHOLE = "kept whole as json; a path ({name}.<field>) takes one of its fields as a column of its own"


@dataclass(frozen=True)
class Derived:
    fields: dict[str, dict[str, Any]]  # as a declaration writes them: name -> {type, required, ...}
    left_out: dict[str, str]  # name -> why
    chosen: dict[str, str] = field(default_factory=dict)  # name -> the choice made, and the others


class _Fields:
    """The fields being derived, in the writer's order."""

    def __init__(self) -> None:
        self.fields: dict[str, dict[str, Any]] = {}
        self.left_out: dict[str, str] = {}
        self.chosen: dict[str, str] = {}

    def take(self, name: str, spec: dict[str, Any] | str, required: bool, what: str) -> None:
        """`spec`: the declared type's mapping, or why none holds the field (`what` it is)."""
        if isinstance(spec, str):
            self.left_out[name] = spec
            return
        self.fields[name] = {
            "type": spec["type"],
            "required": required,
            **{k: v for k, v in spec.items() if k != "type"},
        }
        if spec["type"] == "json":
            self.chosen[name] = f"{what}, " + _WHOLE.format(name=name)

    def derived(self) -> Derived:
        return Derived(self.fields, self.left_out, self.chosen)


def _decimal(precision: Any, scale: Any) -> dict[str, Any] | str:
    if not isinstance(precision, int) or not 1 <= precision <= MAX_DECIMAL_PRECISION:
        return f"a decimal of precision {precision!r}: a declared decimal holds 1 to {MAX_DECIMAL_PRECISION} digits"
    if not isinstance(scale, int) or not 0 <= scale <= precision:
        return f"a decimal of scale {scale!r} (precision {precision})"
    return {"type": "decimal", "precision": precision, "scale": scale}


def _array(items: dict[str, Any] | str) -> dict[str, Any]:
    """An array of `items`: a Postgres array where they are one of the item types, else json."""
    if isinstance(items, dict) and items["type"] in ITEM_TYPES:
        return {**items, "type": "array", "items": items["type"]}
    return {"type": "json"}


def avro_fields(schema: Any) -> Derived:
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError("the Avro schema is not a record")
    out = _Fields()
    for spec in schema.get("fields", []):
        kind, nullable = spec["type"], False
        if isinstance(kind, list):
            others = [k for k in kind if k != "null"]
            nullable = len(others) < len(kind)
            kind = others[0] if len(others) == 1 else kind
        out.take(spec["name"], _avro_type(kind), not nullable and "default" not in spec, f"an Avro {_shown(kind)}")
    return out.derived()


def _avro_type(kind: Any) -> dict[str, Any] | str:
    if isinstance(kind, dict):
        logical, name = kind.get("logicalType"), kind.get("type")
        if logical == "decimal":
            return _decimal(kind.get("precision"), kind.get("scale", 0))
        if logical in _AVRO_LOGICAL:
            return {"type": _AVRO_LOGICAL[logical]}
        if logical is not None and name not in _AVRO_WHOLE:
            return f"Avro logical type {logical} has no declared type"
        if name == "array":
            items = kind.get("items")
            if isinstance(items, list) and len([i for i in items if i != "null"]) == 1:
                items = next(i for i in items if i != "null")  # nullable items: a Postgres array holds NULL
            return _array(_avro_type(items))
        if name in _AVRO_WHOLE:
            return {"type": "json"}
        kind = name
    if isinstance(kind, str) and kind in _AVRO:
        return {"type": _AVRO[kind]}
    return f"Avro type {_shown(kind)} has no declared type"


def protobuf_fields(file) -> Derived:
    """`file`: a FileDescriptorProto; its first message is the one a value's default message index names."""
    if not file.message_type:
        raise ValueError("the Protobuf schema declares no message")
    out = _Fields()
    maps = {
        f".{file.package}.{m.name}.{n.name}" if file.package else f".{m.name}.{n.name}"
        for m in file.message_type
        for n in m.nested_type
        if n.options.map_entry
    }
    for spec in file.message_type[0].field:
        one = _proto_type(spec)
        what = f"a Protobuf {spec.type_name.lstrip('.') or F.Type.Name(spec.type)}"
        if spec.label == F.LABEL_REPEATED:
            is_map = spec.type_name in maps
            one = {"type": "json"} if is_map else _array(one)
            what = "a Protobuf map" if is_map else f"repeated {what.removeprefix('a ')}"
        out.take(spec.name, one, False, what)
    return out.derived()


def _proto_type(spec) -> dict[str, Any] | str:
    if spec.type in _PROTO:
        return {"type": _PROTO[spec.type]}
    if spec.type_name in _PROTO_MESSAGES:
        return {"type": _PROTO_MESSAGES[spec.type_name]}
    if spec.type_name in _PROTO_DECIMALS:
        return (
            f"{spec.type_name.lstrip('.')} carries its scale in each value: declare it as "
            "{type: decimal, precision: P, scale: S}"
        )
    if spec.type == F.TYPE_MESSAGE:
        return {"type": "json"}
    return f"Protobuf type {spec.type_name or F.Type.Name(spec.type)} has no declared type"


def json_schema_fields(schema: Any) -> Derived:
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        raise ValueError("the JSON Schema has no properties")
    required = set(schema.get("required") or ())
    out = _Fields()
    for name, spec in schema["properties"].items():
        kind = spec.get("type") if isinstance(spec, dict) else None
        nullable = isinstance(kind, list) and "null" in kind
        out.take(
            name,
            _json_type(spec),
            name in required and not nullable,
            f"a JSON Schema {_shown(kind) if kind is not None else 'value'}",
        )
    return out.derived()


def _json_type(spec: Any) -> dict[str, Any] | str:
    kind = spec.get("type") if isinstance(spec, dict) else None
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        kind = others[0] if len(others) == 1 else None
    if kind == "string":
        if spec.get("format") in _JSON_FORMATS:
            return {"type": _JSON_FORMATS[spec["format"]]}
        return {"type": "bytes" if spec.get("contentEncoding") == "base64" else "string"}
    if kind == "array":
        return _array(_json_type(spec.get("items")))
    if kind == "object":
        return {"type": "json"}
    if isinstance(kind, str) and kind in _JSON:
        return {"type": _JSON[kind]}
    return f"JSON type {_shown(spec.get('type') if isinstance(spec, dict) else spec)} has no declared type"


def _shown(kind: Any) -> str:
    if isinstance(kind, dict):
        return str(kind.get("logicalType") or kind.get("type"))
    return str(kind)
