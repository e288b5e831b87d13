"""The Confluent wire format's frame, split without a registry."""

import pytest

from microingest.decode.codec import DecodeError
from microingest.decode.framing import split_frame


def test_a_framed_value_gives_its_schema_id_and_payload():
    schema_id, payload = split_frame(bytes([0, 0, 1, 0, 7]) + b"\x0aabc")
    assert (schema_id, bytes(payload)) == (65543, b"\x0aabc")


def test_an_empty_payload_is_still_a_frame():
    assert bytes(split_frame(bytes([0, 0, 0, 0, 3]))[1]) == b""


@pytest.mark.parametrize(
    "value, begins",
    [
        (b'{"event_id": "e"}', "7b 22 65 76 65"),  # JSON where Avro was declared
        (bytes([1, 0, 0, 0, 3, 9]), "01 00 00 00 03"),  # another magic byte
        (bytes([0, 0, 0]), "00 00 00"),  # cut inside the header
        (b"", "nothing"),
    ],
)
def test_anything_else_is_refused_naming_what_it_begins_with(value, begins):
    with pytest.raises(DecodeError) as error:
        split_frame(value)
    assert error.value.error_class == "not_framed" and f"begins with {begins}" in str(error.value)
