"""Protobuf schemas as a registry holds them (.proto text or base64 descriptors, with their imports) compiled into
file descriptors by protoc, without a registry."""

import base64

import pytest
from google.protobuf import descriptor_pb2

from microingest.systems.proto_files import file_descriptors
from microingest.systems.schema_registry import UnreadableSchemaError

UNIT = 'syntax = "proto3";\npackage shop.common;\nmessage Unit { string code = 1; }\n'
ORDER = (
    'syntax = "proto3";\npackage shop;\nimport "common/unit.proto";\nimport "google/protobuf/timestamp.proto";\n'
    'import "google/type/money.proto";\n'
    "message Order { string id = 1; shop.common.Unit unit = 2; google.protobuf.Timestamp at = 3; "
    "google.type.Money price = 4; }\nmessage Note { string text = 1; }\n"
)


def test_text_with_a_registered_import_and_unregistered_well_known_ones_compiles_dependencies_first():
    files = file_descriptors({"schema_7.proto": ORDER, "common/unit.proto": UNIT}, "writer schema id 7")
    names = [f.name for f in files]
    assert names.index("common/unit.proto") < names.index("schema_7.proto")
    assert {"google/protobuf/timestamp.proto", "google/type/money.proto"} <= set(names)
    order = next(f for f in files if f.name == "schema_7.proto")
    assert [m.name for m in order.message_type] == ["Order", "Note"]  # the order message indexes count in


def test_a_base64_import_serves_a_text_schema():
    unit = file_descriptors({"common/unit.proto": UNIT}, "ref")[-1]
    serialized = base64.b64encode(unit.SerializeToString()).decode()
    files = file_descriptors({"schema_8.proto": ORDER, "common/unit.proto": serialized}, "writer schema id 8")
    assert files[-1].name == "schema_8.proto" and "common/unit.proto" in [f.name for f in files]


def test_base64_descriptors_alone_need_no_protoc_and_come_dependencies_first():
    main = descriptor_pb2.FileDescriptorProto(name="m.proto", dependency=["d.proto"])
    dep = descriptor_pb2.FileDescriptorProto(name="d.proto")
    encoded = {n: base64.b64encode(p.SerializeToString()).decode() for n, p in (("m.proto", main), ("d.proto", dep))}
    assert [f.name for f in file_descriptors(encoded, "x")] == ["d.proto", "m.proto"]


def test_text_protoc_refuses_is_an_unreadable_schema_with_protocs_reason():
    with pytest.raises(
        UnreadableSchemaError,
        match=r"writer schema id 9 is .proto text protoc cannot compile: "
        r"missing/thing.proto: File not found",
    ):
        file_descriptors({"schema_9.proto": 'syntax = "proto3"; import "missing/thing.proto";'}, "writer schema id 9")


def test_an_import_name_that_would_leave_the_folder_is_refused():
    with pytest.raises(UnreadableSchemaError, match=r"no relative .proto file name"):
        file_descriptors({"../../etc/x.proto": UNIT, "m.proto": ORDER}, "writer schema id 10")
