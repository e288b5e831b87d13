"""The message indexes Protobuf's frame carries before the message (pure byte arithmetic)."""

import pytest

from microingest.decode.codec import DecodeError
from microingest.decode.protobuf import message_indexes


@pytest.mark.parametrize("frame, path", [
    (b"\x00", (0,)),  # the first message, written as a lone 0
    (b"\x02\x02", (1,)),  # one index: the second top-level message
    (b"\x04\x02\x00", (1, 0)),  # the first message nested in the second
    (b"\x02\xac\x02", (150,)),  # a varint of two bytes
])
def test_the_path_and_the_message_after_it(frame, path):
    found, rest = message_indexes(memoryview(frame + b"\x0a\x01x"))
    assert (found, bytes(rest)) == (path, b"\x0a\x01x")


@pytest.mark.parametrize("frame", [b"", b"\x04\x02", b"\x02\x80", b"\x01"])
def test_a_path_that_ends_early_or_counts_backwards_is_undecodable(frame):
    with pytest.raises(DecodeError) as error:
        message_indexes(memoryview(frame))
    assert error.value.error_class == "undecodable"
