"""The JVM's Avro decoder (StrictAvroDecoder, run without Spark) against the reference (RecordProcessor: fastavro,
then the declared types), record by record, on values framed under writer schemas registered in the real registry:
every record the JVM takes, the reference stages with the same values (type, every bit of a double, sign of zero,
microseconds); every record the reference makes a dead letter, the JVM declines; and it takes ordinary records of
every writer schema it has a plan for."""

from __future__ import annotations

import json
import random
import struct
import uuid

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from helpers.avro_corpus import AS_IS, NOT_AS_IS, framed, millis, mutate, random_datum, record
from helpers.avro_orders import AVRO_ORDER_SCHEMA, WRITERS, avro_order
from helpers.hostile_records import SCHEMA
from helpers.jvm_decoder import compared as jvm_compared
from helpers.jvm_decoder import spark_headers
from helpers.order_corpus import order_headers
from helpers.pipeline_env import REGISTRY_TIMEOUT
from microingest.declare.validate import parse_pipeline
from microingest.decode import jvm_avro, jvm_spec

NODE = {
    "type": "record",
    "name": "Node",
    "fields": [{"name": "v", "type": "long"}, {"name": "next", "type": ["null", "Node"]}],
}
COLOUR = {"type": "enum", "name": "Colour", "symbols": ["RED", "GREEN", "BLUE"]}
# Writer schemas the JVM reads: each declared field as it is, around fields of every kind it skips.
PLANNED = [
    *AS_IS,
    record(
        ("head", NODE),
        ("id", "string"),
        ("colour", COLOUR),
        ("paint", ["null", "Colour", "string", "long", "double"]),
        ("at", millis("local-timestamp-millis")),
        ("tags", {"type": "array", "items": "string"}),
        ("scores", {"type": "map", "values": ["null", "float"]}),
        ("hash", {"type": "fixed", "name": "Hash", "size": 3}),
        ("nested", record(("deep", {"type": "array", "items": {"type": "map", "values": "boolean"}}), ("i", "int"))),
        ("n", ["long", "null"]),
        ("doubles", {"type": "array", "items": "double"}),
        ("tail", "Node"),
    ),
    record(
        ("id", "string"),
        ("at", "int"),
        ("unit", "null"),
        ("ok", "boolean"),
        ("note", {"type": "enum", "name": "Short", "symbols": ["X"]}),
    ),
    record(("id", "string"), ("at", ["null", millis("local-timestamp-micros")])),
]
# Writer schemas the reference decodes alone, and why.
LEFT = [
    *zip(NOT_AS_IS, ["required field 'id'", "logical type uuid", "union", "long", "logical type date", "record"]),
    (record(("id", "string"), ("price", {"type": "bytes", "logicalType": "decimal", "precision": 4})), "decimal"),
    (record(("id", "string"), ("empty", {"type": "array", "items": "null"})), "take no bytes"),
    (record(("id", "string"), ("id", "string")), "repeats"),
]


@pytest.fixture(scope="module")
def registered(registry) -> dict[int, dict]:
    """Every writer schema above by the id the registry gave it, each under a subject of its own."""
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    schemas = PLANNED + [schema for schema, _ in LEFT[:-1]]  # the registry refuses a repeated field name itself
    return {client.register_schema(f"jvm-{uuid.uuid4().hex}", Schema(json.dumps(s), "AVRO")): s for s in schemas}


def pipeline(**changes):
    return parse_pipeline(
        {"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, "value_format": "avro", **changes}
    )


def plans(p, registered: dict[int, dict]) -> dict[int, dict]:
    found = {}
    for schema_id, schema in registered.items():
        try:
            found[schema_id] = jvm_avro.plan(schema, p)
        except jvm_avro.LeftToReference:
            pass
    return found


def compared(p, registry, registered, records) -> list[bool]:
    return jvm_compared(p, records, registry, plans(p, registered))


def test_every_schema_the_jvm_reads_is_planned_and_every_other_says_why(registered):
    p = pipeline()
    assert len(plans(p, registered)) == len(PLANNED)
    for schema, why in LEFT:
        with pytest.raises(jvm_avro.LeftToReference, match=why):
            jvm_avro.plan(schema, p)


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_whatever_it_takes_it_decodes_exactly_as_the_reference(registered, registry, mode):
    rng = random.Random(20261127)
    p = pipeline(sink_mode=mode, max_value_bytes=400)
    records = []
    for _ in range(6000):
        schema_id, schema = rng.choice(list(registered.items()))
        value = framed(schema_id, schema, random_datum(rng, schema))
        key = rng.choice([b"k1", b"k2", b"", None, b"\xff", b"\\x41"] if rng.random() < 0.1 else [b"k1"])
        records.append((key, mutate(rng, value) if rng.random() < 0.25 else value))
    taken = compared(p, registry, registered, records)
    assert 1500 < sum(taken) < len(taken) - 1500  # both sides of the decision were exercised


def _zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def test_bytes_fastavro_reads_its_own_way_are_declined(registered, registry):
    """Every value here is one fastavro reads (some it reads wrongly, some it refuses): the JVM declines them all,
    and takes the same record written plainly."""
    p = pipeline()
    [v3] = [i for i, s in registered.items() if s is PLANNED[4]]
    head = b"\x00" + v3.to_bytes(4, "big")
    plain = head + b"\x02a" + _zigzag(5) + b"\x01" + b"\x00"  # id "a", at 5 ms, ok true, note X
    odd = [
        head + b"\x02a" + _zigzag(5) + b"\x02" + b"\x00",  # a boolean of 2, which fastavro reads as true
        head + b"\x02a" + b"\x8a\x00" + b"\x01" + b"\x00",  # 5 as a varint of two bytes
        head + b"\x02a" + _zigzag(2**40) + b"\x01" + b"\x00",  # an int past 32 bits
        head + b"\x02a" + _zigzag(5) + b"\x01" + b"\x01",  # enum index -1: fastavro gives the last symbol
        head + b"\x02a" + _zigzag(5) + b"\x01" + b"\x02",  # enum index past the symbols
        head + b"\x02\xff" + _zigzag(5) + b"\x01" + b"\x00",  # a string of invalid UTF-8
        head + b"\x02\x00" + _zigzag(5) + b"\x01" + b"\x00",  # a NUL id
        head + b"\x01a" + _zigzag(5) + b"\x01" + b"\x00",  # a string of length -1
        head + b"\x02a" + b"\xff" * 10 + b"\x01" + b"\x01" + b"\x00",  # a varint of 11 bytes
        plain + b"\x00",  # a byte past the datum
        plain[:-1],
    ]
    taken = compared(p, registry, registered, [(b"k", v) for v in [plain, *odd]])
    assert taken == [True] + [False] * len(odd)


def test_ordinary_records_of_every_planned_schema_are_taken(registered, registry):
    p = pipeline()
    ordinary = {
        "id": "e1",
        "n": 7,
        "amount": 0.25,
        "ok": False,
        "at": 1_700_000_000_123,
        "note": "A",
        "extra": b"\x00",
        "unit": None,
        "colour": "RED",
        "paint": 1.5,
        "tags": ["x", "\u00e9"],
        "scores": {"a": None, "b": 2.5},
        "hash": b"abc",
        "nested": {"deep": [{"t": True}], "i": -3},
        "doubles": [-0.0, 1e300],
        "head": {"v": 1, "next": {"v": 2, "next": None}},
        "tail": {"v": 3, "next": None},
    }
    records = []
    for schema_id, schema in registered.items():
        if any(schema is s for s in PLANNED):
            datum = {f["name"]: ordinary.get(f["name"]) for f in schema["fields"]}
            if schema is PLANNED[4]:
                datum.update(at=5, note="X")
            records.append((b"k", framed(schema_id, schema, datum)))
    assert all(compared(p, registry, registered, records))


@pytest.fixture(scope="module")
def order_writers(registry) -> dict[int, dict]:
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    return {client.register_schema(f"jvm-{uuid.uuid4().hex}", Schema(json.dumps(s), "AVRO")): s for s in WRITERS}


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_orders_of_every_declared_type_nested_in_arrays_key_and_headers_decode_as_the_reference(
    order_writers, registry, mode
):
    """Each declared type from every writer form the reference takes (logical types, text, plain numbers), at the
    edges of each (digits past a decimal's precision, days past 9999, ISO text of every shape, UUIDs in braces),
    under nested records, arrays and unions with null, with the key and headers: whatever the JVM takes, the
    reference stages the same."""
    p = pipeline(schema=AVRO_ORDER_SCHEMA, sink_mode=mode, max_value_bytes=2000)
    assert jvm_spec.declines_pipeline(p) is None
    plans = {i: jvm_avro.plan(s, p) for i, s in order_writers.items()}  # every writer planned: none left
    rng = random.Random(20261201)
    records = []
    for _ in range(9000):
        schema_id, writer = rng.choice(list(order_writers.items()))
        value = framed(schema_id, writer, avro_order(rng, writer))
        key = rng.choice([b"o-1", b"", None, b"\xff", b"\\x41"]) if rng.random() < 0.1 else b"o-1"
        records.append((key, mutate(rng, value) if rng.random() < 0.1 else value, spark_headers(order_headers(rng))))
    taken = jvm_compared(p, records, registry, plans)
    assert 3000 < sum(taken) < len(taken) - 1500  # both sides of the decision, for every writer
    for schema_id in order_writers:
        mine = [t for t, r in zip(taken, records, strict=True) if r[1] and r[1][1:5] == schema_id.to_bytes(4, "big")]
        assert 0.2 * len(mine) < sum(mine) < len(mine)


def test_a_path_through_an_array_arrays_of_times_and_json_numbers_with_fractions_are_left_to_the_reference():
    schema = {name: f for name, f in AVRO_ORDER_SCHEMA.items() if name != "skus"}
    indexed = pipeline(schema={**schema, "first_sku": {"type": "string", "path": "skus.0"}})
    with pytest.raises(jvm_avro.LeftToReference, match="'skus' is array, not a record"):
        jvm_avro.plan(WRITERS[0], indexed)
    assert "stamps" in jvm_spec.declines_pipeline(
        pipeline(schema={**AVRO_ORDER_SCHEMA, "stamps": {"type": "array", "items": "timestamp"}})
    )
    stamps = {"type": "map", "values": {"type": "long", "logicalType": "timestamp-millis"}}
    with pytest.raises(jvm_avro.LeftToReference, match=r"'attributes\{\}' \(json\) has the logical type timestamp"):
        jvm_avro.plan(
            {**WRITERS[0], "fields": [*WRITERS[0]["fields"][:-1], {"name": "attributes", "type": stamps}]},
            pipeline(schema=AVRO_ORDER_SCHEMA),
        )


def test_floats_and_doubles_in_a_json_field_are_written_as_pythons_repr(registry):
    """Doubles of every exponent, subnormals and zeros of both signs (random bit patterns), and floats: the JVM
    writes each as Python's repr() does, and declines NaN and the infinities, which the reference refuses."""
    writer = record(
        ("id", "string"), ("attributes", {"type": "map", "values": {"type": "array", "items": ["double", "float"]}})
    )
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    schema_id = client.register_schema(f"jvm-{uuid.uuid4().hex}", Schema(json.dumps(writer), "AVRO"))
    p = pipeline(schema={"id": {"type": "string", "required": True}, "attributes": "json"})
    rng = random.Random(20261202)

    def number() -> float:
        if rng.random() < 0.3:
            return rng.choice([0.0, -0.0, 1e16, 1e-5, 0.0001, 5e-324, 2.0**-1022, 9007199254740993.0, 0.1, 1.5])
        return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]

    records = [
        (b"k", framed(schema_id, writer, {"id": "a", "attributes": {"x": [number() for _ in range(8)]}}))
        for _ in range(4000)
    ]
    taken = jvm_compared(p, records, registry, {schema_id: jvm_avro.plan(writer, p)})
    assert 3000 < sum(taken) < len(taken)  # NaN and the infinities, a few in a thousand, are declined
