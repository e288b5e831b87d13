"""A framed value's writer schema, from the registry: the step every registry format (avro, json_schema) shares."""

from __future__ import annotations

from typing import Any

from microingest.decode.codec import DecodeError
from microingest.decode.framing import split_frame
from microingest.systems.schema_registry import UnknownSchemaError, writer_schema

UNKNOWN_SCHEMA = "unknown_schema"  # error_class values of microingest.dead_letters
UNDECODABLE = "undecodable"


def framed(value: bytes, registry: dict[str, str], schema_type: str) -> tuple[int, memoryview, Any]:
    """(schema id, payload, the registry's Schema) of a framed value whose writer schema is of `schema_type`."""
    schema_id, payload = split_frame(value)
    try:
        schema = writer_schema(registry, schema_id)
    except UnknownSchemaError as exc:
        raise DecodeError(UNKNOWN_SCHEMA, str(exc)) from None
    found = schema.schema_type or "AVRO"  # the registry's API leaves the type out for Avro
    if found != schema_type:
        raise DecodeError(UNKNOWN_SCHEMA, f"schema id {schema_id} is a {found} schema, not {schema_type}")
    return schema_id, payload, schema
