"""Protobuf framing without a registry: the message indexes before the message, and the message they name in the
writer's file (pure byte and descriptor arithmetic)."""

import base64

import pytest

from microingest.decode.codec import DecodeError
from microingest.decode.protobuf import message_class, message_indexes
from microingest.systems.schema_registry import UnreadableSchemaError


@pytest.mark.parametrize(
    "frame, path",
    [
        (b"\x00", (0,)),  # the first message, written as a lone 0
        (b"\x02\x02", (1,)),  # one index: the second top-level message
        (b"\x04\x02\x00", (1, 0)),  # the first message nested in the second
        (b"\x02\xac\x02", (150,)),  # a varint of two bytes
    ],
)
def test_the_path_and_the_message_after_it(frame, path):
    found, rest = message_indexes(memoryview(frame + b"\x0a\x01x"))
    assert (found, bytes(rest)) == (path, b"\x0a\x01x")


@pytest.mark.parametrize("frame", [b"", b"\x04\x02", b"\x02\x80", b"\x01"])
def test_a_path_that_ends_early_or_counts_backwards_is_undecodable(frame):
    with pytest.raises(DecodeError) as error:
        message_indexes(memoryview(frame))
    assert error.value.error_class == "undecodable"


class Registered:
    """A schema as the registry client returns it: the file descriptor, serialized and base64-encoded."""

    def __init__(self, proto):
        self.schema_str = base64.b64encode(proto.SerializeToString()).decode()
        self.references = []


def test_indexes_pick_a_message_of_the_writers_file_and_no_other():
    from google.protobuf import descriptor_pb2, timestamp_pb2

    proto = descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb)
    proto.name, proto.package = "mine.proto", "mine"  # its own file beside the well-known one
    found = message_class({"url": "unit"}, 1, Registered(proto), (0,))
    assert found.DESCRIPTOR.full_name == "mine.Timestamp"
    for path in ((-1,), (1,), (0, 0), (2**64,)):
        with pytest.raises(DecodeError) as error:
            message_class({"url": "unit"}, 1, Registered(proto), path)
        assert error.value.error_class == "undecodable"


def test_a_schema_importing_what_is_not_there_fails_the_batch_instead_of_dead_lettering_good_records():
    from google.protobuf import descriptor_pb2

    proto = descriptor_pb2.FileDescriptorProto(name="needs.proto", dependency=["company/money.proto"])
    with pytest.raises(UnreadableSchemaError, match="cannot be built"):
        message_class({"url": "unit"}, 2, Registered(proto), (0,))
