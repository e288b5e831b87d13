"""Avro values in the Confluent wire format -> the writer's record as a dict, decoded by fastavro with the writer
schema the registry holds for the value's id. The declared fields are then taken by name (codec.fields_from_object),
so producers on older and newer schema versions land in the same columns: a field a version lacks is null (refused
when required), a field the declaration does not name is left out, int and float promote to integer and double."""

from __future__ import annotations

import io
import json
import re
import uuid
from typing import Any

from microingest.decode.avro_bounds import unbounded_array
from microingest.decode.codec import DecodeError
from microingest.decode.registered import UNDECODABLE, framed
from microingest.systems.schema_registry import UnreadableSchemaError

_OBJECT_AT = re.compile(r"<[^<>]* object at 0x[0-9a-fA-F]+>")
# fastavro's parsed writer schemas, kept as the registry's are, with the path of an array it must not read
_PARSED: dict[tuple[str, int], tuple[Any, str | None]] = {}


def decode_avro(value: bytes, registry: dict[str, str]) -> dict:
    """The writer's record, its logical types as the declared types take them."""
    record, schema_id = decode_avro_datum(value, registry)
    if not isinstance(record, dict):
        raise DecodeError(
            UNDECODABLE, f"writer schema id {schema_id} is not an Avro record but {type(record).__name__}"
        )
    return plain(record)


def decode_avro_datum(value: bytes, registry: dict[str, str], part: str = "value") -> tuple[Any, int]:
    """(whatever the writer wrote, a record or a primitive, and the writer schema's id) of a framed value or key."""
    import fastavro

    schema_id, payload, schema = framed(value, registry, "AVRO", part)
    key = (registry["url"], schema_id)
    if key not in _PARSED:
        try:
            writer = json.loads(schema.schema_str)
            _PARSED[key] = fastavro.parse_schema(writer), unbounded_array(writer)
        except Exception as exc:  # the registry's schema, not the record: no dead letter
            raise UnreadableSchemaError(
                f"writer schema id {schema_id} is no Avro schema fastavro reads: {type(exc).__name__}: {exc}"
            ) from None
    parsed, unbounded = _PARSED[key]
    if unbounded is not None:  # the records are kept whole as dead letters; the pipeline goes on
        raise DecodeError(
            UNDECODABLE,
            f"writer schema id {schema_id} has an array of items that take no bytes "
            f"(at {unbounded or 'the top'}), whose count no value's length bounds: "
            "microingest does not decode it",
        )
    stream = io.BytesIO(payload)
    try:
        record = fastavro.schemaless_reader(stream, parsed, None)
    except EOFError:
        raise DecodeError(
            UNDECODABLE,
            f"{part} ends inside its Avro datum of writer schema id {schema_id} ({len(payload)} bytes after the frame)",
        ) from None
    except Exception as exc:  # corrupt: the same bytes fail the same way on every retry
        said = _OBJECT_AT.sub("the value", str(exc))  # a reason names no address: it must read the same every time
        raise DecodeError(
            UNDECODABLE,
            f"{part} does not decode as Avro with writer schema id {schema_id}: {type(exc).__name__}: {said}",
        ) from None
    if stream.tell() != len(payload):
        raise DecodeError(
            UNDECODABLE,
            f"{part} has {len(payload) - stream.tell()} byte(s) beyond the Avro datum of writer schema id {schema_id}",
        )
    return record, schema_id


def plain(value: Any) -> Any:
    """Logical types fastavro returns as Python objects, as the declared types take them, in nested records, arrays
    and maps too: uuid as text; a decimal stays exact, a date a date, for the declared type to take. Nested values
    are changed in place (fastavro made them for this record), level by level: a record nested however deep takes
    no recursion."""
    if isinstance(value, uuid.UUID):
        return str(value)
    pending = [value] if isinstance(value, (dict, list)) else []
    while pending:
        node = pending.pop()
        for key, item in list(node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(item, uuid.UUID):
                node[key] = str(item)
            elif isinstance(item, (dict, list)):
                pending.append(item)
    return value
