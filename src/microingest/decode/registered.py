"""A framed value's writer schema, from the registry: the step every registry format (avro, json_schema) shares."""

from __future__ import annotations

from typing import Any

from microingest.decode.codec import DecodeError
from microingest.decode.framing import split_frame
from microingest.systems.schema_registry import UnknownSchemaError, UnreadableSchemaError, writer_schema

UNKNOWN_SCHEMA = "unknown_schema"  # error_class values of microingest.dead_letters
UNDECODABLE = "undecodable"


def required(registry: dict[str, str] | None, fmt: str) -> dict[str, str]:
    """The registry settings, which a registry format cannot decode without (every job passes them for such a
    pipeline: a missing one is a bug, not a bad record)."""
    if registry is None:
        raise ValueError(f"{fmt} data names its writer schema in the schema registry, and no registry was given")
    return registry


def framed(
    value: bytes, registry: dict[str, str], schema_type: str, part: str = "value"
) -> tuple[int, memoryview, Any]:
    """(schema id, payload, the registry's Schema) of a framed value (or key: `part`) whose writer schema is of
    `schema_type`."""
    schema_id, payload = split_frame(value, part)
    schema = registered(registry, schema_id)
    if schema.references and schema_type != "PROTOBUF":  # protobuf resolves its imports
        raise UnreadableSchemaError(
            f"writer schema id {schema_id} refers to other registered schemas "
            f"({', '.join(r.name for r in schema.references)}), which microingest resolves for Protobuf only"
        )
    found = schema.schema_type or "AVRO"  # the registry's API leaves the type out for Avro
    if found != schema_type:
        raise DecodeError(UNKNOWN_SCHEMA, f"schema id {schema_id} is a {found} schema, not {schema_type}")
    return schema_id, payload, schema


def registered(registry: dict[str, str], schema_id: int, fmt: str | None = None):
    """The registry's Schema of `schema_id`; an id it does not know is the record's problem, a dead letter."""
    try:
        return writer_schema(registry, schema_id, fmt)
    except UnknownSchemaError as exc:
        raise DecodeError(UNKNOWN_SCHEMA, str(exc)) from None
