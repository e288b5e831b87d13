"""The whole-batch Avro decoder against the reference (RecordProcessor, record by record), on values framed under
writer schemas registered in the real registry: whenever it takes a batch, each record's staged values are exactly
the reference's; and it does take ordinary batches, of one writer schema or several."""

from __future__ import annotations

import copy
import io
import json
import random
import uuid

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from helpers.pipeline_env import REGISTRY_TIMEOUT
from helpers.reference_check import rows_as_reference
from microingest.declare.validate import parse_pipeline
from microingest.decode.avro_batch import decode_values
from microingest.decode.records import RecordProcessor

SCHEMA = {
    "id": {"type": "string", "required": True},
    "n": "integer",
    "amount": "double",
    "ok": "boolean",
    "at": "timestamp",
    "note": "string",
}
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


# Writer schemas the decoder takes (each declared field as it is) and ones it leaves to the reference
TAKEN = [
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
    record(
        ("id", "string"),
        ("at", millis("local-timestamp-millis")),
        ("n", ["null", "long"]),
        ("tags", {"type": "array", "items": "string"}),
    ),
]
LEFT = [
    record(("n", "long")),  # the required id missing: every record a dead letter
    record(("id", {"type": "string", "logicalType": "uuid"})),  # the reference writes the UUID its own way
    record(("id", "string"), ("n", ["null", "long", "string"])),
    record(("id", "string"), ("amount", "long")),  # a long into a double: the reference's float() decides
    record(("id", "string"), ("at", {"type": "int", "logicalType": "date"})),
    record(("id", "string"), ("note", record(("x", "string")))),
]


@pytest.fixture(scope="module")
def registered(registry) -> list[tuple[int, dict, bool]]:
    """(schema id, writer schema, whether the decoder takes it) of each schema, registered under a subject of its
    own."""
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    return [
        (client.register_schema(f"batch-{uuid.uuid4().hex}", Schema(json.dumps(schema), "AVRO")), schema, taken)
        for taken, group in ((True, TAKEN), (False, LEFT))
        for schema in group
    ]


def pipeline(**changes):
    return parse_pipeline(
        {"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, "value_format": "avro", **changes}
    )


def decoded_or_none(p, registry, records):
    """decode_values on these (key, value) records: their rows, checked against the reference, or None."""
    got = decode_values(
        pa.array([k for k, _ in records], pa.binary()), pa.array([v for _, v in records], pa.binary()), p, registry
    )
    return rows_as_reference(got, records, RecordProcessor(p, registry))


def plain_numbers(schema: dict) -> dict:
    """The schema with its logical types left out: the same bytes, written from plain numbers (out of range too)."""

    def strip(t):
        if isinstance(t, list):
            return [strip(b) for b in t]
        if isinstance(t, dict) and "logicalType" in t:
            return {k: v for k, v in t.items() if k != "logicalType"}
        if isinstance(t, dict) and t.get("type") == "record":
            return {**t, "fields": [{**f, "type": strip(f["type"])} for f in t["fields"]]}
        return t

    return strip(copy.deepcopy(schema))


def random_datum(rng: random.Random, avro_type):
    """Mostly ordinary values, sometimes one at an edge (NUL, NaN, extremes of range)."""
    if isinstance(avro_type, list):
        return random_datum(rng, rng.choice(avro_type))
    if isinstance(avro_type, dict):
        kind = avro_type["type"]
        if kind == "enum":
            return rng.choice(avro_type["symbols"])
        if kind == "array":
            return [random_datum(rng, avro_type["items"]) for _ in range(rng.randrange(3))]
        if kind == "record":
            return {f["name"]: random_datum(rng, f["type"]) for f in avro_type["fields"]}
        return random_datum(rng, kind)
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


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_whatever_it_takes_it_decodes_exactly_as_the_reference(registered, registry, mode):
    rng = random.Random(20261124)
    p = pipeline(sink_mode=mode, max_value_bytes=60)
    taken = declined = 0
    for _ in range(1500):
        size = rng.choice([1, 1, 2, 5])
        records = []
        for _ in range(size):
            schema_id, schema, _ = rng.choice(registered[: len(TAKEN)] if rng.random() < 0.8 else registered)
            value = framed(schema_id, schema, random_datum(rng, schema))
            records.append(
                (
                    rng.choice([b"k1", b"k2", b"", None, b"\xff", b"\\x41"] if rng.random() < 0.1 else [b"k1"]),
                    mutate(rng, value) if rng.random() < 0.15 else value,
                )
            )
        if decoded_or_none(p, registry, records) is None:
            declined += 1
        else:
            taken += 1
    assert taken > 100 and declined > 100  # both sides of the decision were exercised


def test_an_ordinary_batch_of_several_writer_schemas_is_taken(registered, registry):
    p = pipeline()
    (first, v1, _), (third, v3, _) = registered[0], registered[2]
    good = [
        (
            b"k",
            framed(
                first,
                v1,
                {
                    "id": f"e{i}",
                    "n": i,
                    "amount": i / 7,
                    "ok": i % 2 == 0,
                    "at": 1_700_000_000_000 + i,
                    "note": None if i % 3 else "x\ty",
                    "extra": b"\x00",
                },
            ),
        )
        for i in range(100)
    ]
    good += [(b"k", framed(third, v3, {"id": f"f{i}", "note": None, "at": -i, "amount": 0.5})) for i in range(100)]
    rows = decoded_or_none(p, registry, good)
    assert len(rows) == 200 and rows[150][2:4] == ("f50", None)
    for schema_id, schema, taken in registered[4:]:
        assert not taken
        datum = {f["name"]: random_datum(random.Random(1), f["type"]) for f in schema["fields"]}
        assert decoded_or_none(p, registry, good + [(b"k", framed(schema_id, schema, datum))]) is None, schema


def test_a_mix_of_timestamp_units_or_a_transform_keeps_the_batch_with_the_reference(registered, registry):
    (first, v1, _), (second, v2, _) = registered[0], registered[1]
    in_ms = framed(
        first, v1, {"id": "a", "n": 1, "amount": 1.0, "ok": True, "at": 1_700_000_000_000, "note": "x", "extra": b""}
    )
    in_us = framed(second, v2, {"id": "b", "n": 1, "amount": 1.0, "ok": True, "at": 1_700_000_000_000_000, "note": "A"})
    p = pipeline()
    assert decoded_or_none(p, registry, [(b"k", in_ms)])[0][6] == decoded_or_none(p, registry, [(b"k", in_us)])[0][6]
    assert decoded_or_none(p, registry, [(b"k", in_ms), (b"k", in_us)]) is None
    assert (
        decoded_or_none(pipeline(transform="microingest.transforms:require_positive_amount"), registry, [(b"k", in_ms)])
        is None
    )
