"""Orders as Avro producers write them, for the differential tests of the JVM's Avro decoder against the reference:
the declaration of `pipelines/orders.yaml` but its index paths, and writer schemas that give each
declared type in every form the reference takes (logical types, text, plain numbers), in nested records, arrays and
unions with null; datums mostly well formed, each part now and then at an edge or of any value its writer type holds.
"""

from __future__ import annotations

import json
import random
import uuid

from helpers.avro_corpus import random_datum
from helpers.json_corpus import date_text, decimal_token, iso_timestamp, uuid_text
from helpers.order_corpus import ORDER_SCHEMA

# The JSON orders' declaration but its paths through arrays (the JVM's Avro plans follow records alone), and two types
# JSON cannot give it: dates in an array and bytes in the value.
AVRO_ORDER_SCHEMA = {
    **{name: field for name, field in ORDER_SCHEMA.items() if name not in ("first_sku", "second_qty")},
    "days": {"type": "array", "items": "date"},
    "blob": "bytes",
}


def _record(name: str, *fields) -> dict:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


def _decimal(precision: int, scale: int, **fixed) -> dict:
    kind = {"type": "fixed", "name": fixed["name"], "size": fixed["size"]} if fixed else {"type": "bytes"}
    return {**kind, "logicalType": "decimal", "precision": precision, "scale": scale}


_TIER = {"type": "enum", "name": "Tier", "symbols": ["gold", "silver"]}
_ADDRESS = _record("Address", ("city", "string"), ("zip", ["null", "string"]))
# The shop's own schema: logical types throughout.
LOGICAL = _record(
    "Order",
    ("order_id", {"type": "string", "logicalType": "uuid"}),
    ("placed_at", {"type": "long", "logicalType": "timestamp-micros"}),
    ("total", _decimal(12, 2)),
    ("currency", ["null", "string"]),
    ("shipped_on", ["null", {"type": "int", "logicalType": "date"}]),
    ("customer", _record("Customer", ("id", "string"), ("tier", ["null", "string"]), ("address", ["null", _ADDRESS]))),
    ("skus", {"type": "array", "items": "string"}),
    ("item_prices", {"type": "array", "items": ["null", _decimal(10, 2, name="Money", size=5)]}),
    ("flags", ["null", {"type": "array", "items": "boolean"}]),
    ("days", {"type": "array", "items": {"type": "int", "logicalType": "date"}}),
    ("blob", "bytes"),
    (
        "attributes",
        {"type": "map", "values": ["null", "string", "long", "boolean", "double", {"type": "array", "items": _TIER}]},
    ),
)
# A producer that writes text: ISO-8601 times, decimal text, dates as text, an enum tier, a fixed blob.
TEXT = _record(
    "Order",
    ("order_id", "string"),
    ("placed_at", "string"),
    ("total", "string"),
    ("shipped_on", ["null", "string"]),
    (
        "customer",
        [
            "null",
            _record(
                "Customer",
                ("tier", _TIER),
                ("id", "string"),
                ("address", _record("Address", ("zip", "string"), ("city", ["null", "string"]))),
            ),
        ],
    ),
    ("skus", {"type": "array", "items": ["null", "string"]}),
    ("item_prices", ["null", {"type": "array", "items": "string"}]),
    ("days", {"type": "array", "items": ["null", "string"]}),
    ("blob", ["null", {"type": "fixed", "name": "Blob", "size": 4}]),
    (
        "attributes",
        [
            "null",
            _record(
                "Attributes",
                ("gift", "boolean"),
                ("note", ["null", "string"]),
                ("code", {"type": "string", "logicalType": "uuid"}),
                ("when", {"type": "int", "logicalType": "date"}),
                ("amount", _decimal(6, 2)),
                ("raw", {"type": "fixed", "name": "Raw", "size": 3}),
                ("fee", _decimal(4, 4, name="Fee", size=2)),
            ),
        ],
    ),
)
# One that writes numbers: epoch milliseconds, money as a double or a long, prices as doubles; no currency, no days.
NUMBERS = _record(
    "Order",
    ("placed_at", "long"),
    ("order_id", "string"),
    ("total", ["null", "double"]),
    ("currency", "string"),
    ("customer", _record("Customer", ("id", "string"), ("since", "long"))),
    ("item_prices", {"type": "array", "items": "double"}),
    ("flags", {"type": "array", "items": ["null", "boolean"]}),
    ("skus", {"type": "array", "items": "string"}),
    ("extra", {"type": "map", "values": ["null", "float"]}),
    ("attributes", "string"),
)
WRITERS = [LOGICAL, TEXT, NUMBERS]


def avro_order(rng: random.Random, writer: dict) -> dict:
    """A datum of `writer` (the logical types written as their plain numbers and bytes, `avro_corpus.framed`): each
    field mostly a good value, now and then at an edge or any value its type holds."""
    return {f["name"]: _field(rng, f["name"], f["type"]) for f in writer["fields"]}


def _field(rng: random.Random, name: str, avro_type):
    if rng.random() < 0.02:
        return random_datum(rng, avro_type)
    if isinstance(avro_type, list):
        avro_type = rng.choice([t for t in avro_type if t != "null"]) if rng.random() < 0.9 else "null"
        if avro_type == "null":
            return None
    kind = avro_type if isinstance(avro_type, str) else avro_type["type"]
    logical = avro_type.get("logicalType") if isinstance(avro_type, dict) else None
    edge = rng.random() < 0.08
    if kind == "record":
        return {f["name"]: _field(rng, f["name"], f["type"]) for f in avro_type["fields"]}
    if kind == "array":
        return [_field(rng, name, avro_type["items"]) for _ in range(rng.choice([0, 1, 2, 3]))]
    if kind == "map":
        return {f"k{i}": _field(rng, name, avro_type["values"]) for i in range(rng.choice([0, 1, 2]))}
    if logical == "decimal":
        return _unscaled(rng, avro_type, edge)
    if logical == "date":
        edges = [rng.randrange(-800_000, 3_000_000), -719_162, -719_163, 2_932_896, 2_932_897]
        return rng.choice(edges) if edge else rng.randrange(25_000)
    if logical == "uuid":
        return _text(rng, "order_id", edge)
    if logical == "timestamp-micros":
        edges = [-62_135_596_800_000_000, -62_135_596_800_000_001, 253_402_300_799_999_999, 2**62]
        return rng.choice(edges) if edge else 1_700_000_000_000_000 + rng.randrange(10**12)
    if kind in ("float", "double") and name in ("total", "item_prices") and not edge:
        return rng.randrange(10**6) / 4  # whole quarters: exact in binary, two places
    if kind == "string":
        return _text(rng, name, edge)
    return random_datum(rng, avro_type)


def _text(rng: random.Random, name: str, edge: bool) -> str:
    """Text as producers write each field, or (`edge`) a form the reference may refuse or read its own way."""
    if name == "order_id":
        return uuid_text(rng) if edge else str(uuid.UUID(int=rng.getrandbits(128)))
    if name == "placed_at":
        return (
            iso_timestamp(rng) if edge else f"2026-11-{rng.randint(1, 30):02d}T12:{rng.randint(0, 59):02d}:05.25+01:00"
        )
    if name in ("total", "item_prices"):
        token = decimal_token(rng)
        return (
            (json.loads(token) if token.startswith('"') else token)
            if edge
            else f"{rng.randrange(10**5)}.{rng.randrange(100):02d}"
        )
    if name in ("shipped_on", "days"):
        return date_text(rng) if edge else f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    return rng.choice(["", "a\x00b", "\u00e9\U0001f600"]) if edge else f"v{rng.randrange(100)}"


def _unscaled(rng: random.Random, avro_type: dict, edge: bool) -> bytes:
    """A decimal's unscaled two's complement bytes: within the writer's precision, or (`edge`) one digit more (which
    fastavro rounds), empty, or at the extremes of a fixed's size."""
    precision = avro_type["precision"]
    n = rng.randrange(-(10**precision) + 1, 10**precision)
    if edge:
        n = rng.choice([10**precision, -(10**precision), 0, 10**precision - 1, n])
    size = avro_type.get("size")
    if size is None:
        return b"" if edge and rng.random() < 0.2 else n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)
    n = max(min(n, 2 ** (8 * size - 1) - 1), -(2 ** (8 * size - 1)))
    return n.to_bytes(size, "big", signed=True)
