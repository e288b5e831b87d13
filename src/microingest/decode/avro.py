"""Avro values in the Confluent wire format -> the writer's record as a dict, decoded by fastavro with the writer
schema the registry holds for the value's id. The declared fields are then taken by name (codec.fields_from_object),
so producers on older and newer schema versions land in the same columns: a field a version lacks is null (refused
when required), a field the declaration does not name is left out, int and float promote to integer and double."""

from __future__ import annotations

import io

from microingest.decode.codec import DecodeError
from microingest.decode.framing import split_frame
from microingest.systems.schema_registry import UnknownSchemaError, parsed_avro

UNKNOWN_SCHEMA = "unknown_schema"  # error_class values of microingest.dead_letters
UNDECODABLE = "undecodable"


def decode_avro(value: bytes, registry: dict[str, str]) -> dict:
    import fastavro

    schema_id, payload = split_frame(value)
    try:
        writer = parsed_avro(registry, schema_id)
    except UnknownSchemaError as exc:
        raise DecodeError(UNKNOWN_SCHEMA, str(exc)) from None
    stream = io.BytesIO(payload)
    try:
        record = fastavro.schemaless_reader(stream, writer, None)
    except Exception as exc:  # truncated or corrupt: the same bytes fail the same way on every retry
        raise DecodeError(UNDECODABLE, f"value does not decode as Avro with writer schema id {schema_id}: "
                                       f"{type(exc).__name__}: {exc}") from None
    if stream.tell() != len(payload):
        raise DecodeError(UNDECODABLE, f"value has {len(payload) - stream.tell()} byte(s) beyond the Avro record of "
                                       f"writer schema id {schema_id}")
    if not isinstance(record, dict):
        raise DecodeError(UNDECODABLE, f"writer schema id {schema_id} is not an Avro record but "
                                       f"{type(record).__name__}")
    return record
