"""Hostile Kafka records for the poison-record tests, unit and integration alike: keys written by Kafka's numeric
serializers, headers with NUL and bytes that are not text, values whose fields Postgres cannot store.

A record is (key, value, headers); headers are [(name, value bytes or None)] as a producer sends them, and
`kafka_batch` gives them to the stager the way Spark does (Spark's to_json of the headers column: values base64).
"""

from __future__ import annotations

import base64
import json
import random
import struct

import pyarrow as pa

from microingest.decode.staged_rows import KAFKA_COLUMNS

KAFKA_TIMESTAMP_MICROS = 1_700_000_000_000_000  # kafka_batch's records: this plus their offset
SCHEMA = {
    "id": {"type": "string", "required": True},
    "n": "integer",
    "amount": "double",
    "ok": "boolean",
    "at": "timestamp",
    "note": "string",
}

HOSTILE_KEYS = [
    None,
    b"",
    b"k",
    struct.pack(">i", 7),
    struct.pack(">q", -1),
    struct.pack(">i", 0),
    b"\x00",
    b"a\x00b",
    b"\\x41",
    b"\\",
    b"\xff\xfe",
    b"\xed\xa0\x80",
    "\u00e9\U0001f600".encode(),
    b"\xc3",
    b"x" * 300,
]
HOSTILE_HEADERS = [
    None,
    [("trace", b"\x00")],
    [("trace", b"a\x00b")],
    [("bin", b"\xff\x00\xfe")],
    [("nul\x00name", b"v")],
    [("lone\ud800", b"v")],
    [("null-value", None)],
    [("dup", b"1"), ("dup", b"2")],
    [("", b"")],
    [("text", "\u00e9\U0001f600".encode())],
    [("surrogate-bytes", b"\xed\xa0\x80")],
]
# Each one poison for some part of the way to Postgres before the platform proved values storable.
HOSTILE_VALUES = [
    b'{"id": "a", "at": 1e20}',
    b'{"id": "a", "at": -1e20}',
    b'{"id": "a", "at": 253402300800000}',
    b'{"id": "a", "at": -62135596800001}',
    b'{"id": "a", "at": "0001-01-01T00:30:00+01:00"}',
    b'{"id": "a", "at": "9999-12-31T23:30:00-01:00"}',
    b'{"id": "a", "at": "0001-01-01T00:00:00"}',
    b'{"id": "a", "at": "9999-12-31T23:59:59.999999+00:00"}',
    b'{"id": "\\ud800"}',
    b'{"id": "a\\udc00b"}',
    b'{"id": "\\ud83d\\ude00"}',
    b'{"id": "a", "note": "\\u0000"}',
    b'{"id": "a\\u0000"}',
    b'{"id": "a", "n": 1e19}',
    b'{"id": "a", "n": -9223372036854775809}',
    b'{"id": "a", "n": 1e300}',
    b'{"id": "a", "amount": 1e999}',
    b'{"id": "a", "amount": NaN}',
    b'{"id": "a", "amount": -Infinity}',
    b'{"id": "a", "at": "yesterday\\u0000"}',
    b'{"id": "a", "at": "\\ud800"}',
    b'{"id": "a", "at": NaN}',
    b'{"id": "a", "at": 1.5}',
    b'{"id": "a", "ok": 1}',
    b'{"id": "\\\\x00ff"}',
    b'{"id": "\\\\N"}',
    b"\x00",
    b'{"id": "a"}\x00',
    b'{"id": "a\x00"}',
    b"\xed\xa0\x80",
    b"",
    b'{"id": "a", "note": "' + "\u00e9".encode() * 3 + b'"}',
]


def ordinary_value(rng: random.Random, i: int) -> bytes:
    return json.dumps(
        {
            "id": f"e{i}",
            "n": rng.randrange(-(2**63), 2**63),
            "amount": rng.uniform(-1e9, 1e9),
            "ok": rng.random() < 0.5,
            "at": 1_700_000_000_000 + i,
            "note": rng.choice([None, "x\ty", "\u00e9"]),
        }
    ).encode()


def hostile_record(rng: random.Random, i: int) -> tuple:
    roll = rng.random()
    value = rng.choice(HOSTILE_VALUES) if roll < 0.4 else None if roll < 0.45 else ordinary_value(rng, i)
    if value is not None and rng.random() < 0.1:
        value = mutated(rng, value)
    return rng.choice(HOSTILE_KEYS), value, rng.choice(HOSTILE_HEADERS)


def mutated(rng: random.Random, value: bytes) -> bytes:
    i = rng.randrange(len(value) + 1)
    return value[:i] + bytes([rng.choice([0, 0x5C, 0xED, 0xFF, rng.randrange(256)])]) + value[i + 1 :]


def headers_as_spark_gives_them(headers: list[tuple] | None) -> str | None:
    if not headers:
        return None  # the job selects headers only where there are some
    entries = [
        {"key": name} if value is None else {"key": name, "value": base64.b64encode(value).decode("ascii")}
        for name, value in headers
    ]
    return json.dumps(entries)


def kafka_batch(topic: str, partition: int, offsets, records) -> pa.RecordBatch:
    """What a Spark task hands the stager: (key, value[, headers]) records at these offsets of one partition."""
    records, offsets = list(records), list(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * len(offsets)),
            pa.array([partition] * len(offsets), pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.array([KAFKA_TIMESTAMP_MICROS + o for o in offsets], pa.int64()),
            pa.array([r[0] for r in records], pa.binary()),
            pa.array([r[1] for r in records], pa.binary()),
            pa.array([headers_as_spark_gives_them(r[2] if len(r) > 2 else None) for r in records], pa.string()),
        ],
        names=list(KAFKA_COLUMNS),
    )


def original_key(staged: str | None) -> bytes | None:
    """storable.key_text, inverted as docs/exactly-once.md tells users to: `\\x` + hex is the key's bytes."""
    if staged is None:
        return None
    if staged.startswith("\\x"):
        return bytes.fromhex(staged[2:])
    return staged.encode("utf-8")


def original_headers(stored: list[dict] | None) -> list[tuple] | None:
    """The dead-letter table's headers read back as docs/exactly-once.md says: text, else base64 of the bytes."""
    if stored is None:
        return None
    out = []
    for h in stored:
        name = h["key"] if "key" in h else base64.b64decode(h["key_base64"]).decode("utf-8", "surrogatepass")
        value = (
            h["value"].encode()
            if "value" in h
            else base64.b64decode(h["value_base64"])
            if "value_base64" in h
            else None
        )
        out.append((name, value))
    return out
