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
    }
    assert set(derived.left_out) == {"day", "tags", "either"}
    assert derived.left_out["tags"] == "Avro type array has no declared type"


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
        "kind": {"type": "string", "required": False},
    }
    assert set(derived.left_out) == {"tags", "raw"}


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
    }
    assert list(derived.left_out) == ["nested"]


def test_schemas_without_fields_to_take_are_refused():
    with pytest.raises(ValueError):
        avro_fields("string")
    with pytest.raises(ValueError):
        protobuf_fields(descriptor_pb2.FileDescriptorProto(name="empty.proto"))
    with pytest.raises(ValueError):
        json_schema_fields({"type": "string"})
