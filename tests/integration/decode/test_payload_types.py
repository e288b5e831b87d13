"""Real payloads on the real platform (Kafka, registry, Spark, Postgres): orders carrying money, a date, a UUID, a
signature's bytes, a nested customer, arrays and JSON attributes, produced as JSON, Avro and Protobuf by the formats'
own serializers. Every value lands exactly: decimals digit for digit, bytes byte for byte, JSON by JSON equality,
arrays element by element; each bad value is a dead letter naming the field and the type."""

from __future__ import annotations

import base64
import json
import os
import random
import subprocess
import uuid
from dataclasses import replace
from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from psycopg2 import sql

from helpers.avro_corpus import serialize
from helpers.protobuf_corpus import serialized
from microingest.commit.target_tables import prepare_targets
from microingest.decode import arrow_json, avro_batch
from microingest.decode.jvm_spec import declines_pipeline

SCHEMA = {
    "order_id": {"type": "uuid", "required": True},
    "total": {"type": "decimal", "precision": 19, "scale": 2, "required": True},
    "shipped_on": "date",
    "customer_id": {"type": "string", "path": "customer.id"},
    "first_sku": {"type": "string", "path": "skus.0"},
    "skus": {"type": "array", "items": "string"},
    "amounts": {"type": "array", "items": "decimal", "precision": 10, "scale": 2},
    "attributes": "json",
    "signature": "bytes",
    "events": {"type": "array", "items": "timestamp"},
    "related": {"type": "array", "items": "uuid"},
}
COLUMNS = list(SCHEMA)
AVRO_ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "microingest.test",
    "fields": [
        {"name": "order_id", "type": {"type": "string", "logicalType": "uuid"}},
        {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 19, "scale": 2}},
        {"name": "shipped_on", "type": {"type": "int", "logicalType": "date"}},
        {
            "name": "customer",
            "type": {"type": "record", "name": "Customer", "fields": [{"name": "id", "type": "string"}]},
        },
        {"name": "skus", "type": {"type": "array", "items": "string"}},
        {
            "name": "amounts",
            "type": {
                "type": "array",
                "items": {
                    "type": "fixed",
                    "name": "Amount",
                    "size": 8,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 2,
                },
            },
        },
        {
            "name": "attributes",
            "type": {
                "type": "record",
                "name": "Attributes",
                "fields": [
                    {"name": "gift", "type": "boolean"},
                    {"name": "note", "type": ["null", "string"]},
                    {"name": "weight", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 3}},
                ],
            },
        },
        {"name": "signature", "type": "bytes"},
        {
            "name": "events",
            "type": {"type": "array", "items": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        },
        {"name": "related", "type": {"type": "array", "items": ["null", {"type": "string", "logicalType": "uuid"}]}},
    ],
}
PROTO_ORDER = """syntax = "proto3";
package microingest.test;
import "google/type/date.proto";
import "google/type/decimal.proto";
import "google/protobuf/timestamp.proto";
import "confluent/type/decimal.proto";
message Customer { string id = 1; }
message Attributes { bool gift = 1; optional string note = 2; google.type.Decimal weight = 3; }
message Order {
  string order_id = 1;
  confluent.type.Decimal total = 2;
  google.type.Date shipped_on = 3;
  Customer customer = 4;
  repeated string skus = 5;
  repeated string amounts = 6;
  Attributes attributes = 7;
  bytes signature = 8;
  repeated google.protobuf.Timestamp events = 9;
  repeated string related = 10;
}
"""
# As the registry's Protobuf serializers know it (confluent-kafka ships it compiled, not as a file protoc reads).
CONFLUENT_DECIMAL = """syntax = "proto3";
package confluent.type;
message Decimal { bytes value = 1; uint32 precision = 2; int32 scale = 3; }
"""
TEXTS = ["c-1", "\u00e9t\u00e9", "tab\there", 'quote"d', "\U0001f600", ""]


def orders(count: int, seed: int) -> list[dict]:
    """Orders as Python values: the totals use all 19 digits, the dates the years 1 to 9999."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        cents = rng.choice([0, 1, -1, 10**19 - 1, -(10**19 - 1), rng.randrange(-(10**19) + 1, 10**19)])
        out.append(
            {
                "order_id": uuid.UUID(int=rng.getrandbits(128)),
                "total": Decimal(cents).scaleb(-2),
                "shipped_on": rng.choice(
                    [date(1, 1, 1), date(9999, 12, 31), date.fromordinal(rng.randrange(1, 3652059))]
                ),
                "customer": {"id": rng.choice(TEXTS) + str(i)},
                "skus": [rng.choice(TEXTS) + f"-{j}" for j in range(rng.randrange(4))],
                "amounts": [Decimal(rng.randrange(-(10**10) + 1, 10**10)).scaleb(-2) for _ in range(rng.randrange(3))],
                "attributes": {
                    "gift": rng.random() < 0.5,
                    "note": rng.choice([None, "n\u00e9", "line\nbreak"]),
                    "weight": Decimal(rng.randrange(10**9)).scaleb(-3),
                },
                "signature": rng.randbytes(rng.randrange(40)),
                "events": rng.choice(
                    [
                        [],
                        [datetime(1, 1, 1, tzinfo=timezone.utc), None],
                        [datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc)],
                    ]
                    + [[datetime.fromtimestamp(rng.randrange(-(10**10), 10**10) / 1000, timezone.utc)]]
                ),
                "related": [uuid.UUID(int=rng.getrandbits(128)) for _ in range(rng.randrange(3))]
                + rng.choice([[], [None]]),
            }
        )
    return out


def expected_row(order: dict, attributes: dict, arrays: bool = False) -> tuple:
    """The row an order lands as; `arrays`: the writer schema has its events and related orders."""
    return (
        str(order["order_id"]),
        order["total"],
        order["shipped_on"],
        order["customer"]["id"],
        order["skus"][0] if order["skus"] else None,
        order["skus"],
        order["amounts"],
        attributes,
        order["signature"],
        order["events"] if arrays else None,
        [None if u is None else str(u) for u in order["related"]] if arrays else None,
    )


def landed(env) -> list[tuple]:
    """The target's rows in offset order, the JSON read back exactly (psycopg2 would read its numbers as floats), the
    UUID array as text (psycopg2 gives uuid[] as one string)."""
    rows = env.query(
        sql.SQL("SELECT {}, attributes::text FROM {} ORDER BY source_partition, source_offset").format(
            sql.SQL(", ").join(
                sql.SQL("{}::text[]" if c == "related" else "{}").format(sql.Identifier(c)) for c in COLUMNS
            ),
            env.table,
        )
    )
    at, signature = COLUMNS.index("attributes"), COLUMNS.index("signature")
    return [
        (
            *row[:at],
            None if row[-1] is None else json.loads(row[-1], parse_float=Decimal),
            None if row[signature] is None else bytes(row[signature]),
            *row[signature + 1 : -1],
        )
        for row in rows
    ]


def json_text(value) -> str:
    """JSON with Decimals written as their exact number text."""
    marks: dict[str, str] = {}

    def mark(number: Decimal) -> str:
        marks[f"@{len(marks)}@"] = str(number)
        return f"@{len(marks) - 1}@"

    def walk(v):
        if isinstance(v, Decimal):
            return mark(v)
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    text = json.dumps(walk(value))
    for key, number in marks.items():
        text = text.replace(f'"{key}"', number)
    return text


@pytest.fixture
def orders_env(env):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(schema=SCHEMA, dead_letter={"max_fraction": None})
    [prepared] = prepare_targets([env.pipeline], "test")
    assert not isinstance(prepared, Exception), prepared
    return env


def as_json(order: dict) -> bytes:
    doc = {
        **order,
        "order_id": str(order["order_id"]),
        "shipped_on": order["shipped_on"].isoformat(),
        "signature": base64.b64encode(order["signature"]).decode(),
        "events": [None if t is None else t.isoformat() for t in order["events"]],
        "related": [None if u is None else str(u) for u in order["related"]],
    }
    return json_text(doc).encode()


def test_json_orders_land_exactly_and_bad_values_are_dead_letters_naming_field_and_type(orders_env):
    env = orders_env
    good = orders(60, seed=1)
    bad = {
        b"cents": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1.005}',
        b"digits": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 12345678901234567890}',
        b"date": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1, "shipped_on": "2026-02-30"}',
        b"uuid": b'{"order_id": "nope", "total": 1}',
        b"sku": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1, "skus": ["a", 2]}',
        b"customer": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1, "customer": "c"}',
        b"base64": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1, "signature": "AP8"}',
        b"nul": b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "total": 1, "attributes": {"a": "\\u0000"}}',
    }
    env.send_to(0, [(None, as_json(o)) for o in good] + list(bad.items()))
    env.ingest_all()
    assert landed(env) == [expected_row(o, o["attributes"], arrays=True) for o in good]
    dead = {bytes(key): (cls, message) for _, _, cls, message, key, _, _ in env.dead_letters()}
    assert dead == {
        b"cents": (
            "wrong_type",
            "field 'total' (decimal(19,2)): 1.005 has 3 digit(s) after the point; decimal(19,2) holds 17 digit(s) "
            "before the point and 2 after (declare rounding: half_even to round it)",
        ),
        b"digits": (
            "wrong_type",
            "field 'total' (decimal(19,2)): 12345678901234567890 has 20 digit(s) before the point; decimal(19,2) "
            "holds 17 digit(s) before the point and 2 after",
        ),
        b"date": ("wrong_type", "field 'shipped_on' (date): day is out of range for month"),
        b"uuid": (
            "wrong_type",
            "field 'order_id' (uuid): expected a UUID such as 123e4567-e89b-12d3-a456-426614174000, got 'nope'",
        ),
        b"sku": ("wrong_type", "field 'skus' (array of string): element 1: expected a string, got int"),
        b"customer": ("wrong_type", "field 'customer_id' (at customer.id) (string): customer is str, not an object"),
        b"base64": ("wrong_type", "field 'signature' (bytes): expected standard base64 text, got 'AP8'"),
        b"nul": (
            "unstorable",
            "field 'attributes' (json): contains a NUL character, which Postgres text cannot store",
        ),
    }


def test_only_the_reference_decodes_these_types_and_says_why_the_others_decline(orders_env):
    """The whole-batch decoders read the flat types alone; the JVM's decoders all but arrays of timestamps or UUIDs
    (tests/unit/decode/test_jvm_json.py and tests/integration/decode/test_jvm_avro.py hold them to the reference on
    the rest): for this declaration they decline, so the reference's values (above) are the only ones; the day they
    take such fields, their differential tests must cover them."""
    import pyarrow as pa

    pipeline = orders_env.pipeline
    values = pa.array([as_json(o) for o in orders(5, seed=2)], pa.binary())
    keys = pa.array([None] * 5, pa.binary())
    assert arrow_json.decode_values(keys, values, pipeline) is None
    # the Avro one declines before it asks the registry anything
    assert avro_batch.decode_values(keys, values, replace(pipeline, value_format="avro"), {"url": "unused"}) is None
    assert declines_pipeline(pipeline) == "fields of types or paths the JVM decoder does not read: events, related"
    assert declines_pipeline(replace(pipeline, value_format="avro")).endswith("events, related")


def test_avro_orders_land_exactly(orders_env, registry):
    env = orders_env
    env.redeclare(value_format="avro")
    good = orders(60, seed=3)
    values = serialize(registry, env.topic, AVRO_ORDER, [_avro(o) for o in good])
    # a later writer version with a finer total: a value that uses its places does not fit decimal(19,2)
    finer = {**AVRO_ORDER, "fields": [dict(f) for f in AVRO_ORDER["fields"]]}
    finer["fields"][1]["type"] = {"type": "bytes", "logicalType": "decimal", "precision": 21, "scale": 4}
    fine = orders(2, seed=7)
    fine[0]["total"], fine[1]["total"] = Decimal("12.3400"), Decimal("12.3456")
    fine_values = serialize(registry, env.topic, finer, [_avro(o) for o in fine])
    env.send_to(1, [(None, v) for v in values] + [(b"fits", fine_values[0]), (b"finer", fine_values[1])])
    env.ingest_all()
    assert landed(env) == [expected_row(o, o["attributes"], arrays=True) for o in good] + [
        expected_row({**fine[0], "total": Decimal("12.34")}, fine[0]["attributes"], arrays=True)
    ]
    assert [(bytes(key), cls, message) for _, _, cls, message, key, _, _ in env.dead_letters()] == [
        (
            b"finer",
            "wrong_type",
            "field 'total' (decimal(19,2)): 12.3456 has 4 digit(s) after the point; decimal(19,2) holds 17 digit(s) "
            "before the point and 2 after (declare rounding: half_even to round it)",
        )
    ]


def _avro(order: dict) -> dict:
    return {
        **order,
        "order_id": str(order["order_id"]),
        "related": [None if u is None else str(u) for u in order["related"]],
    }


def test_protobuf_orders_land_exactly(orders_env, registry, tmp_path):
    env = orders_env
    env.redeclare(value_format="protobuf")
    # repeated fields hold no null
    good = [
        {**o, "events": [t for t in o["events"] if t], "related": [u for u in o["related"] if u]}
        for o in orders(60, seed=4)
    ]
    records = [
        {
            "order_id": str(o["order_id"]),
            "total": {"value": _twos_complement(o["total"]), "precision": 19, "scale": 2},
            "shipped_on": {"year": o["shipped_on"].year, "month": o["shipped_on"].month, "day": o["shipped_on"].day},
            "customer": o["customer"],
            "skus": o["skus"],
            "amounts": [str(a) for a in o["amounts"]],
            "attributes": {**o["attributes"], "weight": {"value": str(o["attributes"]["weight"])}},
            "signature": base64.b64encode(o["signature"]).decode(),
            "events": [t.isoformat().replace("+00:00", "Z") for t in o["events"]],
            "related": [str(u) for u in o["related"]],
        }
        for o in good
    ]
    for record in records:
        if record["attributes"]["note"] is None:
            del record["attributes"]["note"]
    values = serialized(
        tmp_path,
        PROTO_ORDER,
        registry,
        env.topic,
        records,
        imports={"confluent/type/decimal.proto": CONFLUENT_DECIMAL},
        message="Order",
    )
    env.send_to(2, [(None, v) for v in values])
    env.ingest_all()
    # the weight, a google.type.Decimal, is its exact number in the attributes' JSON
    assert landed(env) == [expected_row(o, o["attributes"], arrays=True) for o in good]
    assert env.dead_letters() == []


def _twos_complement(value: Decimal) -> str:
    unscaled = int(value.scaleb(2))
    return base64.b64encode(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)).decode()


def test_fields_derived_from_the_registry_take_every_avro_order_field_and_the_cli_says_its_choices(env, registry):
    """`schema: {from_registry: ...}` on the Avro orders: decimals with their precision and scale, the date, the UUID,
    the bytes and arrays as such, the nested records kept whole as json; the orders land under it exactly."""
    good = orders(20, seed=5)
    values = serialize(registry, env.topic, AVRO_ORDER, [_avro(o) for o in good])
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    subject = f"{env.topic}-value"
    env.redeclare(value_format="avro", schema={"from_registry": {"subject": subject}})
    assert [f.declared() for f in env.pipeline.schema] == [
        {"type": "uuid", "required": True},
        {"type": "decimal", "required": True, "precision": 19, "scale": 2},
        {"type": "date", "required": True},
        {"type": "json", "required": True},
        {"type": "array", "required": True, "items": "string"},
        {"type": "array", "required": True, "precision": 10, "scale": 2, "items": "decimal"},
        {"type": "json", "required": True},
        {"type": "bytes", "required": True},
        {"type": "array", "required": True, "items": "timestamp"},
        {"type": "array", "required": True, "items": "uuid"},
    ]
    [prepared] = prepare_targets([env.pipeline], "test")
    assert not isinstance(prepared, Exception), prepared
    env.send_to(0, [(None, v) for v in values])
    env.ingest_all()
    rows = env.query(
        sql.SQL(
            "SELECT order_id::text, total, shipped_on, customer::text, amounts, signature FROM {} ORDER BY 1"
        ).format(env.table)
    )
    assert [(r[0], r[1], r[2], json.loads(r[3]), r[4], bytes(r[5])) for r in rows] == sorted(
        ((str(o["order_id"]), o["total"], o["shipped_on"], o["customer"], o["amounts"], o["signature"]) for o in good),
        key=lambda row: row[0],
    )

    shown = subprocess.run(
        ["microingest", "schema", env.pipeline.name],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MICROINGEST_PIPELINES_DIR": str(env.pipelines_dir)},
    )
    assert shown.returncode == 0, shown.stderr
    assert "  total: {type: decimal, precision: 19, scale: 2, required: true}\n" in shown.stdout
    assert "  amounts: {type: array, items: decimal, precision: 10, scale: 2, required: true}\n" in shown.stdout
    assert (
        "# customer: an Avro record, kept whole as json; a path (customer.<field>) takes one of its fields as a "
        "column of its own\n" in shown.stdout
    )


def test_the_key_and_headers_land_as_columns_beside_the_value_fields(env):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(
        schema={
            "event_id": {"type": "string", "required": True},
            "order_key": {"from": "key"},
            "trace_id": {"from": "header", "name": "trace-id"},
            "signature": {"from": "header", "name": "sig", "type": "bytes", "required": True},
        },
        dead_letter={"max_fraction": None},
    )
    [prepared] = prepare_targets([env.pipeline], "test")
    assert not isinstance(prepared, Exception), prepared
    rng = random.Random(6)
    sent = []
    for i in range(50):
        key = rng.choice([None, f"k{i}".encode(), "\u00e9".encode() + bytes([i])])
        trace = rng.choice([None, f"t-{i}-\u00e9", ""])
        signature = rng.randbytes(rng.randrange(1, 20))
        headers = [("sig", signature)] + ([] if trace is None else [("trace-id", trace.encode())])
        sent.append((key, json.dumps({"event_id": f"e{i}"}).encode(), headers, trace, signature))
    bad = [
        (b"no-sig", b'{"event_id": "x"}', [("trace-id", b"t")]),
        (b"bad-trace", b'{"event_id": "y"}', [("trace-id", b"\xff\xfe"), ("sig", b"s")]),
    ]
    env.send_to(0, [(k, v, h) for k, v, h, _, _ in sent] + bad)
    env.ingest_all()
    rows = env.query(sql.SQL("SELECT order_key, trace_id, signature FROM {} ORDER BY source_offset").format(env.table))
    assert [(k, t, bytes(s)) for k, t, s in rows] == [
        (_staged_key(key), trace, signature) for key, _, _, trace, signature in sent
    ]
    dead = {bytes(key): (cls, message) for _, _, cls, message, key, _, _ in env.dead_letters()}
    assert dead == {
        b"no-sig": (
            "missing_field",
            "field 'signature' (from header) is required but the record has no header 'sig', or it is null",
        ),
        b"bad-trace": (
            "wrong_type",
            "field 'trace_id' (string, from header 'trace-id'): not UTF-8 text: invalid start byte at byte 0",
        ),
    }


def _staged_key(key: bytes | None) -> str | None:
    """A key as the string key_format reads it: its text, or its bytes in hex where the text would not be storable."""
    if key is None:
        return None
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        return "\\x" + key.hex()
    return "\\x" + key.hex() if "\x00" in text else text
