"""The bench's Avro dataset: the same records as `dataset` (record i to the same partition and offset), each value
Avro in the Confluent wire format under one schema registered in the schema registry, as a Java or
confluent-kafka producer would write them. Read by the same pipeline declaration with `value_format: avro`."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

from microingest.bench.dataset import SCHEMA, event
from microingest.decode.framing import MAGIC

_AVRO_TYPES = {
    "string": "string",
    "integer": "long",
    "double": "double",
    "boolean": "boolean",
    "timestamp": {"type": "long", "logicalType": "timestamp-millis"},
}


def avro_schema() -> dict[str, Any]:
    """The declared fields as an Avro record: required ones as they are, the others nullable with a null default."""
    fields = []
    for name, spec in SCHEMA.items():
        kind = _AVRO_TYPES[spec if isinstance(spec, str) else spec["type"]]
        required = isinstance(spec, dict) and spec.get("required")
        fields.append(
            {"name": name, "type": kind} if required else {"name": name, "type": ["null", kind], "default": None}
        )
    return {"type": "record", "name": "BenchEvent", "namespace": "microingest.bench", "fields": fields}


def register(registry: dict[str, str], topic: str) -> int:
    """The schema's id, registered under the topic's value subject (Confluent's default naming)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({**registry, "timeout": 30})
    return client.register_schema(f"{topic}-value", Schema(json.dumps(avro_schema()), "AVRO"))


def avro_values(schema_id: int) -> Callable[[int], bytes]:
    """Record i's value, framed under `schema_id`."""
    import fastavro

    parsed = fastavro.parse_schema(avro_schema())
    header = bytes([MAGIC]) + schema_id.to_bytes(4, "big")

    def value(i: int) -> bytes:
        out = io.BytesIO()
        out.write(header)
        fastavro.schemaless_writer(out, parsed, event(i))
        return out.getvalue()

    return value
