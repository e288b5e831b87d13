"""JSON values framed with a JSON Schema's registry id, as confluent-kafka's JSONSerializer writes them."""

import json
from datetime import datetime, timezone

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from helpers.pipeline_env import REGISTRY_TIMEOUT, SERIALIZER_CONF

SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Event",
    "type": "object",
    "properties": {"event_id": {"type": "string"}, "amount": {"type": "number"}, "event_time": {"type": "string"}},
    "required": ["event_id"],
}
AT = datetime(2026, 11, 24, 12, 0, tzinfo=timezone.utc)


def test_framed_json_lands_by_the_declared_fields_and_the_rest_are_dead_letters(env, registry):
    env.redeclare(value_format="json_schema", dead_letter={"max_fraction": None})
    serializer = JSONSerializer(
        json.dumps(SCHEMA), SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT}), conf=SERIALIZER_CONF
    )
    context = SerializationContext(env.topic, MessageField.VALUE)
    good = [
        serializer({"event_id": f"e{i}", "amount": i * 1.5, "event_time": AT.isoformat()}, context) for i in range(20)
    ]
    unknown = b"\x00" + (2**31 - 11).to_bytes(4, "big") + good[0][5:]
    env.send([(None, v) for v in good] + [(b"plain", b'{"event_id": "x"}'), (b"unknown", unknown)])
    env.ingest_all()
    assert sorted(e for _, _, e in env.landed_once()) == sorted(f"e{i}" for i in range(20))
    dead = {bytes(key).decode(): error_class for _, _, error_class, _, key, _, _ in env.dead_letters()}
    assert dead == {"plain": "not_framed", "unknown": "unknown_schema"}
