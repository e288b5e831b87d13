"""No record stops a batch: hostile keys, headers and values go through `stage_batch` (the production path: the
whole-batch Arrow decoder where it takes a batch, record by record where it declines), and every record comes out
once, as a staged row the reference typed or a dead letter the reference named, with every text, number and
timestamp inside what Postgres stores and the key and headers kept losslessly.
tests/integration/decode/test_staged_rows.py COPYs the same output into Postgres."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from helpers.hostile_records import (
    HOSTILE_HEADERS,
    HOSTILE_KEYS,
    HOSTILE_VALUES,
    SCHEMA,
    hostile_record,
    kafka_batch,
    original_headers,
    original_key,
)
from microingest.declare.validate import parse_pipeline
from microingest.decode import arrow_json, storable
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import stage_batch

BATCH_ID = "00000000-0000-0000-0000-000000000001"
FIRST_YEAR, LAST_YEAR = (
    datetime(1, 1, 1, tzinfo=timezone.utc),
    datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),
)


def echo_transform(record: dict) -> dict:
    """A user transform whose exception quotes the record (NUL, lone surrogates and all)."""
    if record.get("note") is not None and record["note"].startswith("\u00e9"):
        raise ValueError(f"refusing {record['id']!s}\x00{record['note']}")
    return record


def pipeline(**changes):
    return parse_pipeline(
        {"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, "max_value_bytes": 3000, **changes}
    )


def unescape_copy_text(field: str) -> str | None:
    if field == r"\N":
        return None
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\":
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[field[i + 1]])
            i += 2
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def assert_storable_text(text: str, what) -> None:
    storable.text(text)  # raises with the reason


def assert_rows_storable(rows: pa.Table) -> None:
    for column in rows.columns:
        if pa.types.is_string(column.type):
            for value in column.to_pylist():
                if value is not None:
                    assert_storable_text(value, column)
        elif pa.types.is_timestamp(column.type) and column.null_count < len(column):
            bounds = pc.min_max(column)
            assert bounds["min"].as_py() >= FIRST_YEAR and bounds["max"].as_py() <= LAST_YEAR
        elif pa.types.is_floating(column.type):
            assert pc.all(pc.or_kleene(pc.is_finite(column), pc.is_null(column))).as_py() is not False


def check_batch(p: RecordProcessor, records: list[tuple]) -> tuple[int, int]:
    """Stage the records as one Spark task would and check every one of them; returns (rows, dead letters)."""
    offsets = range(100, 100 + len(records))
    staged = stage_batch(kafka_batch("t", 0, offsets, records), p, BATCH_ID)
    assert_rows_storable(staged.rows)
    row_by_offset = {r[2]: r for r in zip(*(c.to_pylist() for c in staged.rows.columns))}
    dead_by_offset = {}
    for line in staged.dead_letters:
        assert line.endswith("\n") and "\x00" not in line
        line.encode("utf-8")  # strict: no lone surrogate reaches COPY
        fields = [unescape_copy_text(f) for f in line[:-1].split("\t")]
        assert len(fields) == 10, line
        dead_by_offset[int(fields[3])] = fields
    assert not set(row_by_offset) & set(dead_by_offset), "a record both staged and dead-lettered"
    assert set(row_by_offset) | set(dead_by_offset) == set(offsets), "a record neither staged nor dead-lettered"

    reference = RecordProcessor(p.pipeline)
    for offset, (key, value, headers) in zip(offsets, records):
        try:
            expected = reference.process(key, value)
        except BadRecord as exc:
            fields = dead_by_offset[offset]
            assert (fields[1], fields[2], fields[8]) == ("t", "0", exc.error_class)
            assert fields[9] == storable.message(str(exc)) and fields[9]
            assert_storable_text(fields[9], "error_message")
            assert bytes.fromhex(fields[5][2:]) == key if key is not None else fields[5] is None
            assert bytes.fromhex(fields[6][2:]) == value if value is not None else fields[6] is None
            stored_headers = None if fields[7] is None else json.loads(fields[7])
            assert "\\u0000" not in (fields[7] or "")
            if stored_headers is not None:
                assert_storable_text(json.dumps(stored_headers, ensure_ascii=False), "headers")
            assert original_headers(stored_headers) == (headers or None), "headers kept losslessly"
            continue
        row = row_by_offset[offset]
        assert row[5:] == expected, (key, value, row, expected)
        assert original_key(row[5]) == key, "key kept losslessly"
    return len(row_by_offset), len(dead_by_offset)


@pytest.mark.parametrize("mode", ["append", "upsert_latest", "aggregate"])
def test_every_hostile_record_is_a_storable_row_or_a_dead_letter_by_either_decoder(mode):
    extra = (
        {"aggregate": {"group_by": ["id"], "measures": {"records": "count", "total": {"sum": "n"}}}}
        if mode == "aggregate"
        else {}
    )
    p = RecordProcessor(pipeline(sink_mode=mode, **extra))
    rng = random.Random(hash(mode) % 1000)
    rows = dead = fast = 0
    for batch in range(300):
        size = rng.choice([1, 3, 20])
        pure = rng.random() < 0.3  # some batches with no hostile record at all, which the Arrow decoder takes
        records = [
            (
                b"k%d" % i,
                hostile_record(random.Random(i), i)[1]
                if not pure
                else json.dumps({"id": f"e{i}", "n": i, "at": 1_700_000_000_000 + i}).encode(),
                None,
            )
            if pure
            else hostile_record(rng, i)
            for i in range(size)
        ]
        batch = kafka_batch("t", 0, range(len(records)), records)
        fast += arrow_json.decode_values(batch.column("key"), batch.column("value"), p.pipeline) is not None
        got = check_batch(p, records)
        rows, dead = rows + got[0], dead + got[1]
    assert rows and dead and fast, (rows, dead, fast)  # staged rows, dead letters and the fast path all exercised


def test_each_listed_hostile_input_alone():
    for mode in ("append", "upsert_latest"):
        p = RecordProcessor(pipeline(sink_mode=mode, transform="test_hostile_records:echo_transform"))
        for key in HOSTILE_KEYS:
            check_batch(p, [(key, b'{"id": "a"}', None)])
        for headers in HOSTILE_HEADERS:
            check_batch(p, [(b"k", b'{"id": "a", "ok": 1}', headers)])  # a dead letter keeps its headers
        for value in HOSTILE_VALUES:
            check_batch(p, [(b"k", value, [("h", b"\x00")])])
        check_batch(
            p,
            [
                (b"k", b'{"id": "\\u0000x", "note": "\\u00e9\\ud800"}', None),
                (b"k", b'{"id": "x", "note": "\\u00e9\\u0000"}', None),
            ],
        )


@pytest.mark.parametrize(
    "value, error_class, names",
    [
        (b'{"id": "a", "at": 1e20}', "unstorable", "field 'at' (timestamp): epoch milliseconds 1E+20"),
        (b'{"id": "a", "at": "0001-01-01T00:30:00+01:00"}', "unstorable", "field 'at' (timestamp)"),
        (b'{"id": "\\ud800"}', "unstorable", "field 'id' (string): contains a lone surrogate (U+D800"),
        (b'{"id": "a", "note": "x\\u0000"}', "unstorable", "field 'note' (string): contains a NUL"),
        (b'{"id": "a", "n": 1e19}', "unstorable", "field 'n' (integer): 10000000000000000000 does not fit in 64 bits"),
        (b'{"id": "a", "amount": NaN}', "unstorable", "field 'amount' (double): expected a finite number, got nan"),
    ],
)
def test_a_value_postgres_cannot_store_is_a_dead_letter_naming_the_field(value, error_class, names):
    with pytest.raises(BadRecord) as refused:
        RecordProcessor(pipeline()).process(b"k", value)
    assert refused.value.error_class == error_class and names in str(refused.value)


def test_keys_that_are_not_text_are_staged_in_an_escaped_form_one_to_one():
    process = RecordProcessor(pipeline(sink_mode="upsert_latest")).process
    assert process(b"\x00\x00\x00\x07", b'{"id": "a"}')[0] == "\\x00000007"  # Kafka's IntegerSerializer of 7
    assert process(b"\\x41", b'{"id": "a"}')[0] == "\\x5c783431"  # text that looks escaped is escaped too
    assert process(b"\xff", b'{"id": "a"}')[0] == "\\xff"
    assert process("\u00e9".encode(), b'{"id": "a"}')[0] == "\u00e9"
    rng = random.Random(5)
    keys = {bytes(rng.randrange(256) for _ in range(rng.randrange(4))) for _ in range(5000)} | set(
        k for k in HOSTILE_KEYS if k is not None
    )
    staged = {storable.key_text(k) for k in keys}
    assert len(staged) == len(keys) and all(original_key(storable.key_text(k)) == k for k in keys)
