"""The JVM's JSON decoder against the reference, record by record: every record it takes, the reference stages with
the same values (type, every bit of a double, sign of zero, microseconds); every record the reference makes a dead
letter, it declines; and it takes ordinary records. Runs the decoder's own jar (`make install`) without Spark."""

from __future__ import annotations

import json
import random

import pytest

from helpers.hostile_records import HOSTILE_KEYS, HOSTILE_VALUES, SCHEMA, ordinary_value
from helpers.json_corpus import (
    DECIMAL_EDGES,
    NUMBER_SPELLINGS,
    STRING_SPELLINGS,
    base64_token,
    date_text,
    decimal_token,
    iso_timestamp,
    json_any,
    mutate,
    random_value,
    uuid_text,
)
from helpers.jvm_decoder import compared, spark_headers
from helpers.order_corpus import ORDER_SCHEMA, order_headers, order_value
from microingest.declare.validate import parse_pipeline
from microingest.decode import jvm_spec


def pipeline(**changes):
    return parse_pipeline({"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, **changes})


JVM_ODDITIES = [
    # Other encodings of a good document: valid UTF-8 bytes only where they hold NUL.
    '{"id": "a"}'.encode("utf-16-be"),
    '{"id": "a"}'.encode("utf-16-le"),
    '{"id": "a"}'.encode("utf-16"),
    '{"id": "a"}'.encode("utf-32"),
    b"\xef\xbb\xbf" + b'{"id": "a"}',
    # UTF-8 that Python's decoder refuses: overlong, surrogates, past U+10FFFF, stray or missing continuation bytes.
    b'{"id": "\xc0\x80"}',
    b'{"id": "\xc1\xbf"}',
    b'{"id": "\xe0\x80\x80"}',
    b'{"id": "\xe0\x9f\xbf"}',
    b'{"id": "\xed\xa0\x80"}',
    b'{"id": "\xed\xbf\xbf"}',
    b'{"id": "\xf0\x80\x80\x80"}',
    b'{"id": "\xf0\x8f\xbf\xbf"}',
    b'{"id": "\xf4\x90\x80\x80"}',
    b'{"id": "\xf5\x80\x80\x80"}',
    b'{"id": "\x80"}',
    b'{"id": "\xe2\x82"}',
    b'{"id": "a", "note": "\xe2\x82"}',
    b'{"id": "\xf0\x9f\x98\x80\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf"}',
    # Duplicates: the last wins; an earlier one of the wrong type.
    b'{"id": "a", "id": "b"}',
    b'{"id": "a", "n": "x", "n": 1}',
    b'{"id": "a", "n": 1, "n": null}',
    b'{"id": "a", "id": null}',
    # Fields the pipeline does not read, holding what Python refuses or accepts.
    b'{"id": "a", "x": "\\q"}',
    b'{"id": "a", "x": "\t"}',
    b'{"id": "a", "x": 01}',
    b'{"id": "a", "x": NaN}',
    b'{"id": "a", "x": "\\ud800"}',
    b'{"id": "a", "x": "\\u0000"}',
    b'{"id": "a", "x": [1, {"y": [true, null, -0.0e-5]}]}',
    b'{"id": "a", "x": {"y": [0E1000000000000000000]}}',
    b'{"id": "a", "x": 1e999999999999999999999}',
    b'{"id": "a", "x": 1' + b"0" * 1200 + b"}",
    b'{"id": "a", "x": ' + b"[" * 499 + b"]" * 499 + b"}",
    b'{"id": "a", "x": ' + b"[" * 500 + b"]" * 500 + b"}",
    b'{"id": "a", "x": ' + b"[" * 990 + b"]" * 990 + b"}",
    # What surrounds the object.
    b' \t\r\n{"id": "a"} \t\r\n',
    b'\x0b{"id": "a"}',
    b'{"id": "a"}\x0c',
    b'\xc2\xa0{"id": "a"}',
    b'{"id": "a"},',
    b'{"id": "a"}]',
    b'{"id": "a"}}',
    b'{"id": "a"} 1',
    b'{"id": "a"}{"id": "b"}',
    b'{"id": "a"} /* */',
    b'{"id": "a" /* */}',
    b"{'id': 'a'}",
    b'{id: "a"}',
    b'{"id": "a",}',
    b'{"id": "a", "n": +1}',
    b'{"id": "a", "amount": .5}',
    b'{"id": "a", "amount": 5.}',
    b'{"id": "a", "amount": 1e}',
    b'["a"]',
    b'"a"',
    b"null",
    b"{}",
]


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_whatever_it_takes_it_decodes_exactly_as_the_reference(mode):
    rng = random.Random(20261126)
    p = pipeline(sink_mode=mode, max_value_bytes=3000)
    keys = [*HOSTILE_KEYS, b"k1", "\u00e9".encode()]
    records = [(rng.choice(keys), random_value(rng)) for _ in range(6000)]
    records += [(rng.choice(keys), mutate(rng, ordinary_value(rng, i))) for i in range(2000)]
    taken = compared(p, records)
    assert 1500 < sum(taken) < len(taken) - 1500  # both sides of the decision were exercised


def test_every_listed_oddity_hostile_record_and_spelling_decodes_as_the_reference_or_is_declined():
    p = pipeline()
    values = JVM_ODDITIES + HOSTILE_VALUES
    values += [
        f'{{"id": "a", "{field}": {token}}}'.encode() for field in ("n", "amount", "at") for token in NUMBER_SPELLINGS
    ]
    values += [f'{{"id": "a", "note": {s}}}'.encode() for s in STRING_SPELLINGS]
    values += [f'{{"id": {s}}}'.encode() for s in STRING_SPELLINGS]
    taken = compared(p, [(b"k", v) for v in values])
    by_value = dict(zip(values, taken))
    # The ordinary among them are taken: the decoder is no mere "decline everything".
    for value in (
        b'{"id": "b", "id": "a"}' if False else b'{"id": "a", "id": "b"}',
        b' \t\r\n{"id": "a"} \t\r\n',
        b'{"id": "a", "x": [1, {"y": [true, null, -0.0e-5]}]}',
        b'{"id": "a", "amount": -0}',
        b'{"id": "a", "amount": 1e-400}',
        b'{"id": "a", "at": 253402300799999}',
        b'{"id": "a", "at": -62135596800000}',
        b'{"id": "a", "note": "\\ud83d\\ude00"}',
        b'{"id": "\xf0\x9f\x98\x80\xee\x80\x80\xef\xbf\xbf\xf4\x8f\xbf\xbf"}',
    ):
        assert by_value[value], value


ISO_SPELLINGS = [
    "2026-11-30T12:00:00Z",
    "2026-11-30 12:00:00",
    "2026-11-30T12:00:00.5+05:30",
    "2026-11-30T12:00:00,123456-08:00",
    "2026-11-30T12:00:00.1234565Z",
    "2026-11-30T12:00:00.1234575Z",
    "2026-11-30T12:00:00.999999999Z",
    "2026-11-30T23:59:60Z",
    "2026-11-30T23:59:60.5Z",
    "2026-11-30T24:00:00Z",
    "2026-11-30T24:00:00.000001Z",
    "2024-02-29T00:00:00Z",
    "2023-02-29T00:00:00Z",
    "1900-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "0002-01-01T00:00:00+23:59",
    "9998-12-31T23:59:59-23:59",
    "0001-01-01T00:30:00+01:00",
    "9999-12-31T23:59:59.999999Z",
    "2026-11-30T12:00:00+00:00:30",
    "2026-11-30T12:00:00.1234567890Z",
    "2026-11-30T12:00Z",
    "2026-11-30",
    "2026-W48-1T12:00:00",
    "",
]


def test_iso_8601_timestamps_decode_as_the_reference_or_are_declined():
    rng = random.Random(20261130)
    texts = ISO_SPELLINGS + [iso_timestamp(rng) for _ in range(20_000)]
    values = [json.dumps({"id": "a", "at": text}).encode() for text in texts]
    taken = compared(pipeline(), [(b"k", v) for v in values])
    by_text = dict(zip(texts, taken))
    assert all(by_text[t] for t in ISO_SPELLINGS[:8]), "the common forms are taken"
    assert 8_000 < sum(taken) < len(taken) - 5_000  # both sides of the decision were exercised


TEXT_TYPES_SCHEMA = {
    "id": {"type": "string", "required": True},
    "price": {"type": "decimal", "precision": 12, "scale": 2},
    "rate": {"type": "decimal", "precision": 6, "scale": 4, "rounding": "half_even"},
    "big": {"type": "decimal", "precision": 38, "scale": 10},
    "whole": {"type": "decimal", "precision": 3, "scale": 0, "rounding": "half_even"},
    "day": "date",
    "ref": "uuid",
}


def text_types_value(rng: random.Random) -> bytes:
    """A record of TEXT_TYPES_SCHEMA, each field now and then missing, null or of another JSON type."""
    parts = ['"id": "a"']
    for name, token in (
        ("price", decimal_token),
        ("rate", decimal_token),
        ("big", decimal_token),
        ("whole", decimal_token),
        ("day", lambda r: json.dumps(date_text(r))),
        ("ref", lambda r: json.dumps(uuid_text(r))),
    ):
        roll = rng.random()
        if roll < 0.05:
            continue
        parts.append(f'"{name}": {"null" if roll < 0.08 else rng.choice(["1", "true"]) if roll < 0.1 else token(rng)}')
    return ("{" + ", ".join(parts) + "}").encode()


def test_decimals_dates_and_uuids_decode_as_the_reference_or_are_declined():
    rng = random.Random(20261130)
    p = pipeline(schema=TEXT_TYPES_SCHEMA)
    assert jvm_spec.declines_pipeline(p) is None
    values = [text_types_value(rng) for _ in range(20_000)]
    values += [mutate(rng, text_types_value(rng)) for _ in range(2_000)]
    edges = [
        f'{{"id": "a", "{name}": {token}}}'.encode() for name in ("price", "rate", "whole") for token in DECIMAL_EDGES
    ]
    taken = compared(p, [(b"k", v) for v in values + edges])
    assert 3_000 < sum(taken) < len(taken) - 3_000  # both sides of the decision were exercised
    ordinary = {
        b'{"id": "a", "price": 1234.5, "rate": "0.12345", "big": -0.0, "whole": 2.5}',
        b'{"id": "a", "day": "2024-02-29", "ref": "123E4567E89B12D3A456426614174000"}',
        b'{"id": "a", "price": "12.50", "day": "0001-01-01", "ref": "123e4567-e89b-12d3-a456-426614174000"}',
    }
    assert all(compared(p, [(b"k", v) for v in ordinary]))


def test_bytes_as_base64_text_decode_as_the_reference_or_are_declined():
    rng = random.Random(20261201)
    p = pipeline(
        schema={"id": {"type": "string", "required": True}, "blob": "bytes", "raw": {"type": "bytes", "path": "m.raw"}}
    )
    assert jvm_spec.declines_pipeline(p) is None
    values = [
        f'{{"id": "a", "blob": {base64_token(rng)}, "m": {{"raw": {base64_token(rng)}}}}}'.encode() for _ in range(8000)
    ]
    edges = [
        f'{{"id": "a", "blob": "{t}"}}'.encode() for t in ("", "AA==", "AQ==", "AR==", "AA=", "A===", "====", "AAAA")
    ]
    taken = compared(p, [(b"k", v) for v in values + edges])
    assert 4_000 < sum(taken) < len(taken) - 1_000  # both sides of the decision were exercised
    assert taken[-8:] == [True, True, True, False, False, False, False, True]


def test_every_key_is_staged_as_the_reference_stages_it():
    keys = HOSTILE_KEYS + [b"\\x", b"\\X41", b"\xc0\x80", b"\xf4\x90\x80\x80", "\U0010ffff".encode()]
    for mode in ("append", "upsert_latest"):
        taken = compared(pipeline(sink_mode=mode), [(key, b'{"id": "a"}') for key in keys])
        assert sum(taken) >= len(keys) - 1  # only a null key in upsert_latest goes to the reference (a dead letter)


def test_ordinary_records_are_all_taken():
    rng = random.Random(7)
    p = pipeline()
    assert all(compared(p, [(b"k", ordinary_value(rng, i)) for i in range(500)]))


def test_records_over_the_size_limit_tombstones_and_null_keys_for_upserts_are_declined():
    value = json.dumps({"id": "a", "note": "x" * 100}).encode()
    assert compared(pipeline(max_value_bytes=len(value)), [(b"k", value)]) == [True]
    assert compared(pipeline(max_value_bytes=len(value) - 1), [(b"k", value)]) == [False]
    assert compared(pipeline(sink_mode="upsert_latest"), [(b"k", None), (None, b'{"id": "a"}')]) == [False, False]


def test_pipelines_the_jvm_cannot_decode_say_why():
    assert jvm_spec.declines_pipeline(pipeline()) is None
    assert "transform" in jvm_spec.declines_pipeline(
        pipeline(transform="microingest.transforms:require_positive_amount")
    )
    assert "protobuf" in jvm_spec.declines_pipeline(pipeline(value_format="protobuf"))
    assert jvm_spec.declines_pipeline(pipeline(value_format="avro")) is None
    assert jvm_spec.declines_pipeline(pipeline(value_format="avro", schema=TEXT_TYPES_SCHEMA)) is None
    assert "stamps, refs" in jvm_spec.declines_pipeline(
        pipeline(
            value_format="avro",
            schema={
                **SCHEMA,
                "stamps": {"type": "array", "items": "timestamp"},
                "refs": {"type": "array", "items": "uuid"},
            },
        )
    )


def test_declarations_of_other_field_types_have_functions_of_their_own():
    same = {
        jvm_spec.function_name(p)
        for p in (pipeline(), pipeline(max_value_bytes=10), pipeline(sink_mode="upsert_latest"))
    }
    assert len(same) == 1
    other = pipeline(schema={**SCHEMA, "n": "double"})
    assert jvm_spec.function_name(other) not in same


def test_an_executor_fault_travels_in_the_spec_and_only_then():
    assert "fault" not in json.loads(jvm_spec.spec(pipeline()))
    carried = json.loads(jvm_spec.spec(pipeline(), fault={"MICROINGEST_FAULT": "executor_after_decode:pause:/tmp/x"}))
    assert carried["fault"] == "executor_after_decode:pause:/tmp/x" and "fault_once" not in carried


def test_orders_with_paths_arrays_key_and_headers_decode_as_the_reference_or_are_declined():
    rng = random.Random(20261201)
    p = pipeline(schema=ORDER_SCHEMA)
    assert jvm_spec.declines_pipeline(p) is None
    keys = [b"k", None, b"\xff", b"\\x41", "\u00e9".encode()]
    records = [(rng.choice(keys), order_value(rng), spark_headers(order_headers(rng))) for _ in range(20_000)]
    taken = compared(p, records)
    assert 8_000 < sum(taken) < len(taken) - 3_000  # both sides of the decision were exercised
    ordinary = (
        b'{"order_id": "123e4567-e89b-12d3-a456-426614174000", "placed_at": "2026-11-30T12:00:00.5+01:00", '
        b'"total": 12.5, "customer": {"id": "c1", "address": {"city": "Lyon"}}, "lines": [{"sku": "A"}, {"qty": 2}], '
        b'"skus": ["A", null], "item_prices": [1.005, "2"], "flags": [true]}'
    )
    headers = spark_headers([("trace-id", b"t-0"), ("span", b"\x00\xff"), ("trace-id", b"t-1")])
    assert compared(p, [(b"k", ordinary, headers), (None, ordinary, None)]) == [True, True]


def test_fields_whose_paths_cross_are_left_to_the_reference():
    for schema in (
        {"a": "string", "b": {"type": "string", "path": "a.x"}},
        {"a": {"type": "string", "path": "x.y"}, "b": {"type": "integer", "path": "x.y"}},
        {"a": {"type": "string", "path": "x.1"}, "b": {"type": "string", "path": "x.01"}},
        {"a": {"type": "string", "path": "x.2147483648"}, "b": {"type": "string", "path": "x.9" + "9" * 5000}},
    ):
        assert "cross" in jvm_spec.declines_pipeline(pipeline(schema=schema)), schema
    for apart in (
        {"a": {"type": "string", "path": "x.1"}, "b": {"type": "string", "path": "x.10"}},
        {"a": {"type": "string", "path": "0"}, "b": {"type": "string", "path": "00"}},  # names: the value is an object
    ):
        assert jvm_spec.declines_pipeline(pipeline(schema=apart)) is None, apart


def test_json_fields_are_kept_whole_as_the_reference_writes_them_or_declined():
    rng = random.Random(20261202)
    p = pipeline(schema={"id": {"type": "string", "required": True}, "attributes": "json"})
    assert jvm_spec.declines_pipeline(p) is None
    values = [f'{{"id": "a", "attributes": {json_any(rng)}}}'.encode() for _ in range(20_000)]
    taken = compared(p, [(b"k", v) for v in values])
    assert 8_000 < sum(taken) < len(taken) - 1_000  # both sides of the decision were exercised
    ordinary = b'{"id": "a", "attributes": {"gift": true, "n": [1, 2.50, -0, "\\u00e9\\n"], "n": null, "x": {}}}'
    assert compared(p, [(b"k", ordinary)]) == [True]
