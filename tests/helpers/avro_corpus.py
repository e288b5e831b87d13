"""Avro values for the differential tests of the decoders that must agree with the reference (`avro_batch`, the
JVM's StrictAvroDecoder): writer schemas, random datums mostly ordinary and sometimes at an edge, values framed as
a producer frames them, and mutations of those bytes."""

from __future__ import annotations

import copy
import io
import json
import random
import uuid

import fastavro
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from helpers.pipeline_env import REGISTRY_TIMEOUT, SERIALIZER_CONF

UNKNOWN_ID = 2**31 - 11


def record(*fields) -> dict:
    return {
        "type": "record",
        "name": "Reading",
        "namespace": f"test.u{uuid.uuid4().hex}",
        "fields": [{"name": name, "type": kind} for name, kind in fields],
    }


def millis(kind="timestamp-millis"):
    return {"type": "long", "logicalType": kind}


# Writer schemas for hostile_records.SCHEMA whose declared fields are each of a type it takes as it is (alone or with
# null), and ones where a declared field is not, for the reference to judge.
AS_IS = [
    record(
        ("id", "string"),
        ("n", ["null", "long"]),
        ("amount", ["null", "double"]),
        ("ok", ["null", "boolean"]),
        ("at", ["null", millis()]),
        ("note", ["null", "string"]),
        ("extra", "bytes"),
    ),
    record(
        ("id", "string"),
        ("n", "int"),
        ("amount", "float"),
        ("ok", "boolean"),
        ("at", millis("timestamp-micros")),
        ("note", {"type": "enum", "name": "Note", "symbols": ["A", "B"]}),
    ),
    record(("note", ["string", "null"]), ("id", ["null", "string"]), ("at", "long"), ("amount", ["double", "null"])),
]
NOT_AS_IS = [
    record(("n", "long")),  # the required id missing: every record a dead letter
    record(("id", {"type": "string", "logicalType": "uuid"})),  # the reference writes the UUID its own way
    record(("id", "string"), ("n", ["null", "long", "string"])),
    record(("id", "string"), ("amount", "long")),  # a long into a double: the reference's float() decides
    record(("id", "string"), ("at", {"type": "int", "logicalType": "date"})),
    record(("id", "string"), ("note", record(("x", "string")))),
]


def plain_numbers(schema: dict) -> dict:
    """The schema with its logical types left out: the same bytes, written from plain numbers (out of range too)."""

    def strip(t):
        if isinstance(t, list):
            return [strip(b) for b in t]
        if not isinstance(t, dict):
            return t
        t = {k: v for k, v in t.items() if k != "logicalType"}
        if t.get("type") in ("record", "error"):
            t["fields"] = [{**f, "type": strip(f["type"])} for f in t["fields"]]
        for inner in ("items", "values"):
            if inner in t:
                t[inner] = strip(t[inner])
        return t

    return strip(copy.deepcopy(schema))


def random_datum(rng: random.Random, avro_type, names: dict | None = None, depth: int = 0):
    """Mostly ordinary values, sometimes one at an edge (NUL, NaN, extremes of range); `names`: the named types
    defined so far, by the name the schema gives them (a type that holds itself ends in null past a few levels)."""
    names = {} if names is None else names
    if isinstance(avro_type, list):
        branches = avro_type if depth < 4 or "null" not in avro_type else ["null"]
        return random_datum(rng, rng.choice(branches), names, depth + 1)
    if isinstance(avro_type, str) and avro_type in names:
        return random_datum(rng, names[avro_type], names, depth + 1)
    if isinstance(avro_type, dict):
        kind = avro_type["type"]
        if isinstance(avro_type.get("name"), str):
            names[avro_type["name"]] = avro_type
        if kind == "enum":
            return rng.choice(avro_type["symbols"])
        if kind == "fixed":
            return rng.randbytes(avro_type["size"])
        if kind == "array":
            return [random_datum(rng, avro_type["items"], names, depth + 1) for _ in range(rng.randrange(3))]
        if kind == "map":
            return {
                random_datum(rng, "string"): random_datum(rng, avro_type["values"], names, depth + 1)
                for _ in range(rng.randrange(3))
            }
        if kind == "record":
            return {f["name"]: random_datum(rng, f["type"], names, depth + 1) for f in avro_type["fields"]}
        return random_datum(rng, kind, names, depth)
    if rng.random() < 0.85 and avro_type in ORDINARY:
        return ORDINARY[avro_type](rng)
    return {
        "null": lambda: None,
        "boolean": lambda: rng.random() < 0.5,
        "string": lambda: rng.choice(
            [
                "",
                "a\x00b",
                "\u00e9\u4e2d\U0001f600",
                "plain",
                "tab\there",
                str(uuid.UUID(int=rng.getrandbits(128))).upper(),
            ]
        ),
        "bytes": lambda: rng.randbytes(rng.randrange(4)),
        "int": lambda: rng.choice([0, -1, 2**31 - 1, -(2**31), rng.randrange(-(10**6), 10**6), 20_000]),
        "long": lambda: rng.choice(
            [
                0,
                -1,
                2**63 - 1,
                -(2**63),
                1_700_000_000_123,
                4 * 10**12,
                -4 * 10**12 + 1,
                4 * 10**15 - 1,
                253_402_300_800_000,
                rng.randrange(-(2**40), 2**40),
            ]
        ),
        "float": lambda: rng.choice([0.0, -0.0, 1.5, float("nan"), float("inf"), rng.uniform(-1e6, 1e6)]),
        "double": lambda: rng.choice(
            [0.0, -0.0, 5e-324, 1.7976931348623157e308, float("-inf"), float("nan"), rng.uniform(-1e9, 1e9)]
        ),
    }[avro_type]()


ORDINARY = {
    "string": lambda rng: f"v{rng.randrange(1000)}",
    "int": lambda rng: rng.randrange(-(10**6), 10**6),
    "long": lambda rng: 1_700_000_000_000 + rng.randrange(10**9),
    "float": lambda rng: rng.randrange(100) / 4,
    "double": lambda rng: rng.uniform(-1e9, 1e9),
}


def framed(schema_id: int, schema: dict, datum: dict) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(plain_numbers(schema)), datum)
    return b"\x00" + schema_id.to_bytes(4, "big") + out.getvalue()


def mutate(rng: random.Random, value: bytes) -> bytes | None:
    i = rng.randrange(5, len(value) + 1)
    return rng.choice(
        [
            lambda: value[:i],
            lambda: value + bytes([rng.randrange(256)]),
            lambda: value[:i] + bytes([rng.randrange(256)]) + value[i + 1 :],
            lambda: b"\x01" + value[1:],
            lambda: b"\x00" + UNKNOWN_ID.to_bytes(4, "big") + value[5:],
            lambda: value[:3],
            lambda: None,
        ]
    )()


def serialize(registry: dict, topic: str, schema: dict, records: list, field=MessageField.VALUE) -> list[bytes]:
    """The records as confluent-kafka's AvroSerializer writes them for `topic`, registering `schema` under the
    topic's subject."""
    serializer = AvroSerializer(
        SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT}), json.dumps(schema), conf=SERIALIZER_CONF
    )
    context = SerializationContext(topic, field)
    return [serializer(r, context) for r in records]
