"""The Confluent wire format: magic byte 0, the writer schema's registry id (4 bytes, big-endian), then the payload
(Protobuf adds the message's indexes as zigzag varints before it). Pure byte arithmetic, no registry."""

from __future__ import annotations

from microingest.decode.codec import DecodeError

MAGIC = 0
HEADER_BYTES = 5

NOT_FRAMED = "not_framed"  # error_class values of microingest.dead_letters


def split_frame(value: bytes, part: str = "value") -> tuple[int, memoryview]:
    """(schema id, payload) of a framed value (or key: `part`); DecodeError when it is not one."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        start = value[:HEADER_BYTES].hex(" ") or "nothing"
        raise DecodeError(
            NOT_FRAMED,
            f"{part} is not in the Confluent wire format (magic byte 0 and a 4-byte schema "
            f"id): it begins with {start} ({len(value)} bytes)",
        )
    return int.from_bytes(value[1:HEADER_BYTES], "big"), memoryview(value)[HEADER_BYTES:]
