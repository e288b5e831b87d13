"""The whole-batch Avro decoder against the reference (RecordProcessor, record by record), on values framed under
writer schemas registered in the real registry: whenever it takes a batch, each record's staged values are exactly
the reference's; and it does take ordinary batches, of one writer schema or several."""

from __future__ import annotations

import json
import random
import uuid

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from helpers.avro_corpus import AS_IS, NOT_AS_IS, framed, millis, mutate, random_datum, record
from helpers.hostile_records import SCHEMA
from helpers.pipeline_env import REGISTRY_TIMEOUT
from helpers.reference_check import rows_as_reference
from microingest.declare.validate import parse_pipeline
from microingest.decode.avro_batch import decode_values
from microingest.decode.records import RecordProcessor

# Writer schemas the decoder takes (each declared field as it is) and ones it leaves to the reference
TAKEN = [
    *AS_IS,
    record(
        ("id", "string"),
        ("at", millis("local-timestamp-millis")),
        ("n", ["null", "long"]),
        ("tags", {"type": "array", "items": "string"}),
    ),
]
LEFT = NOT_AS_IS


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
