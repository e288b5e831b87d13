"""Declared fields derived from registered writer schemas, per format."""

import pytest
from google.protobuf import descriptor_pb2

from microingest.declare.derived_fields import avro_fields, json_schema_fields, protobuf_fields
from microingest.systems.proto_files import file_descriptors


def test_avro_fields_by_type_logical_type_union_and_default():
    derived = avro_fields(
        {
            "type": "record",
            "name": "E",
            "fields": [
                {"name": "id", "type": "string"},
                {"name": "n", "type": "long"},
                {"name": "price", "type": ["null", "double"], "default": None},
                {"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A"]}, "default": "A"},
                {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
                {"name": "day", "type": {"type": "int", "logicalType": "date"}},
                {"name": "tags", "type": {"type": "array", "items": "string"}},
                {"name": "either", "type": ["int", "string"]},
            ],
        }
    )
    assert derived.fields == {
        "id": {"type": "string", "required": True},
        "n": {"type": "integer", "required": True},
        "price": {"type": "double", "required": False},
        "kind": {"type": "string", "required": False},
        "at": {"type": "timestamp", "required": True},
        "day": {"type": "date", "required": True},
        "tags": {"type": "array", "items": "string", "required": True},
    }
    assert list(derived.left_out) == ["either"]


def test_protobuf_fields_of_the_first_message_never_required():
    text = (
        'syntax = "proto3"; import "google/protobuf/timestamp.proto"; import "google/protobuf/wrappers.proto";\n'
        "message E { string id = 1; optional int64 n = 2; google.protobuf.Timestamp at = 3; "
        "google.protobuf.DoubleValue price = 4; repeated string tags = 5; bytes raw = 6; Kind kind = 7;\n"
        "enum Kind { A = 0; } }\nmessage Other { string x = 1; }"
    )
    [main] = [f for f in file_descriptors({"e.proto": text}, "test") if f.name == "e.proto"]
    derived = protobuf_fields(main)
    assert derived.fields == {
        "id": {"type": "string", "required": False},
        "n": {"type": "integer", "required": False},
        "at": {"type": "timestamp", "required": False},
        "price": {"type": "double", "required": False},
        "tags": {"type": "array", "items": "string", "required": False},
        "raw": {"type": "bytes", "required": False},
        "kind": {"type": "string", "required": False},
    }
    assert derived.left_out == {}


def test_json_schema_fields_with_required_nullable_and_date_time():
    derived = json_schema_fields(
        {
            "type": "object",
            "required": ["id", "maybe"],
            "properties": {
                "id": {"type": "string"},
                "at": {"type": "string", "format": "date-time"},
                "n": {"type": "integer"},
                "maybe": {"type": ["number", "null"]},
                "nested": {"type": "object"},
            },
        }
    )
    assert derived.fields == {
        "id": {"type": "string", "required": True},
        "at": {"type": "timestamp", "required": False},
        "n": {"type": "integer", "required": False},
        "maybe": {"type": "double", "required": False},
        "nested": {"type": "json", "required": False},
    }
    assert derived.left_out == {}
    assert derived.chosen == {
        "nested": "a JSON Schema object, kept whole as json; a path (nested.<field>) takes one of its fields as a "
        "column of its own"
    }


def test_schemas_without_fields_to_take_are_refused():
    with pytest.raises(ValueError):
        avro_fields("string")
    with pytest.raises(ValueError):
        protobuf_fields(descriptor_pb2.FileDescriptorProto(name="empty.proto"))
    with pytest.raises(ValueError):
        json_schema_fields({"type": "string"})


def test_avro_payload_types_are_derived_with_their_precision_and_the_choices_said():
    money = {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2}
    derived = avro_fields(
        {
            "type": "record",
            "name": "Order",
            "fields": [
                {"name": "order_id", "type": {"type": "string", "logicalType": "uuid"}},
                {"name": "total", "type": money},
                {
                    "name": "cents",
                    "type": {"type": "fixed", "name": "C", "size": 4, "logicalType": "decimal", "precision": 9},
                },
                {"name": "huge", "type": {**money, "precision": 40}},
                {"name": "blob", "type": ["null", "bytes"]},
                {
                    "name": "customer",
                    "type": {"type": "record", "name": "Cu", "fields": [{"name": "id", "type": "string"}]},
                },
                {"name": "amounts", "type": {"type": "array", "items": ["null", money]}},
                {"name": "lines", "type": {"type": "array", "items": "Cu"}},
                {"name": "labels", "type": {"type": "map", "values": "string"}},
                {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
            ],
        }
    )
    assert derived.fields == {
        "order_id": {"type": "uuid", "required": True},
        "total": {"type": "decimal", "precision": 12, "scale": 2, "required": True},
        "cents": {"type": "decimal", "precision": 9, "scale": 0, "required": True},
        "blob": {"type": "bytes", "required": False},
        "customer": {"type": "json", "required": True},
        "amounts": {"type": "array", "items": "decimal", "precision": 12, "scale": 2, "required": True},
        "lines": {"type": "json", "required": True},
        "labels": {"type": "json", "required": True},
    }
    assert derived.left_out == {
        "huge": "a decimal of precision 40: a declared decimal holds 1 to 38 digits",
        "clock": "Avro logical type time-millis has no declared type",
    }
    assert derived.chosen["customer"] == (
        "an Avro record, kept whole as json; a path (customer.<field>) takes one of its fields as a column of its own"
    )
    assert set(derived.chosen) == {"customer", "lines", "labels"}


def test_protobuf_payload_types_are_derived_and_decimal_messages_left_to_the_declaration():
    text = (
        'syntax = "proto3"; import "google/type/date.proto";\n'
        "message Order { google.type.Date shipped_on = 1; Customer customer = 2; map<string, string> labels = 3; "
        "repeated double weights = 4; repeated Customer lines = 5; Money total = 6; }\n"
        "message Customer { string id = 1; }\nmessage Money { string units = 1; }"
    )
    [main] = [f for f in file_descriptors({"o.proto": text}, "test") if f.name == "o.proto"]
    derived = protobuf_fields(main)
    assert derived.fields == {
        "shipped_on": {"type": "date", "required": False},
        "customer": {"type": "json", "required": False},
        "labels": {"type": "json", "required": False},
        "weights": {"type": "array", "items": "double", "required": False},
        "lines": {"type": "json", "required": False},
        "total": {"type": "json", "required": False},
    }
    assert derived.chosen["labels"].startswith("a Protobuf map, kept whole as json")
    assert derived.chosen["lines"].startswith("repeated Protobuf Customer, kept whole as json")


def test_json_schema_payload_types_by_format_and_encoding():
    derived = json_schema_fields(
        {
            "type": "object",
            "properties": {
                "day": {"type": "string", "format": "date"},
                "id": {"type": "string", "format": "uuid"},
                "blob": {"type": "string", "contentEncoding": "base64"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "object"}},
            },
        }
    )
    assert {name: spec["type"] for name, spec in derived.fields.items()} == {
        "day": "date",
        "id": "uuid",
        "blob": "bytes",
        "tags": "array",
        "rows": "json",
    }
