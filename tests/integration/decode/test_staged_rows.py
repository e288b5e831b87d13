"""Staged rows reach Postgres exactly as the reference decoder (RecordProcessor) typed them, by either path (the
whole-batch decoder, or record by record when a batch holds a record it declines), through pgpq's encoder and COPY
(FORMAT binary): quotes, separators, line breaks, empty text against NULL, doubles to the last bit, microseconds."""

from __future__ import annotations

import json
import math
import random
import uuid
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from io import StringIO

import pytest

from helpers.hostile_records import KAFKA_TIMESTAMP_MICROS, SCHEMA, hostile_record, kafka_batch, original_headers
from microingest.batches import DEAD_LETTER_COLUMNS
from microingest.commit.copy_commit import copy_spooled, copy_statement
from microingest.commit.sinks import STAGED_DEAD, STAGED_ROWS, sink_for
from microingest.commit.spool import Spool
from microingest.declare.validate import parse_pipeline
from microingest.decode import arrow_json
from microingest.decode.copy_binary import row_chunks
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import stage_batch
from microingest.systems.postgres import connection

PIPELINE = parse_pipeline({"name": "staged_rows_test", "topic": "t", "target_table": "public.t", "schema": SCHEMA})
TRICKY_TEXT = [
    "",
    "plain",
    'say "hi"',
    "a,b",
    "line\nbreak",
    "cr\rlf",
    "tab\there",
    "back\\slash",
    "\\N",
    "NULL",
    "\u00e9\u4e2d\U0001f600",
    " padded ",
]


def records(rng: random.Random, count: int) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(count):
        doc = {
            "id": rng.choice(TRICKY_TEXT) + str(i),
            "n": rng.choice([None, 0, -(2**63), 2**63 - 1, rng.randrange(10**9)]),
            "amount": rng.choice([None, -0.0, 5e-324, 1.7976931348623157e308, 0.1, rng.uniform(-1e6, 1e6)]),
            "ok": rng.choice([None, True, False]),
            "at": rng.choice([None, 0, -1, 1700000000123, rng.randrange(-4 * 10**12 + 1, 4 * 10**12)]),
            "note": rng.choice([None] + TRICKY_TEXT),
        }
        out.append((rng.choice([None, b"key", b""]), json.dumps(doc).encode()))
    return out


@pytest.fixture
def cur(pg):
    """A transaction holding the two tables a merge stages into, made as the commit makes them."""
    with connection(pg) as conn, conn.cursor() as cursor:
        sink_for(PIPELINE).create_staging(cursor)
        yield cursor
        conn.rollback()


@pytest.mark.parametrize("with_a_bad_record", [False, True], ids=["whole-batch", "record-by-record"])
def test_rows_land_as_the_reference_typed_them(cur, with_a_bad_record):
    recs = records(random.Random(7), 400)
    if with_a_bad_record:
        recs[123] = (b"key", b'{"id": "x", "n": "seven"}')
    batch_id = str(uuid.uuid4())
    staged = stage_batch(kafka_batch("t", 3, range(100, 100 + len(recs)), recs), RecordProcessor(PIPELINE), batch_id)
    assert (staged.rows.num_rows, len(staged.dead_letters)) == ((399, 1) if with_a_bad_record else (400, 0))

    batch = kafka_batch("t", 3, range(100, 100 + len(recs)), recs)
    taken = arrow_json.decode_values(batch.column("key"), batch.column("value"), PIPELINE) is not None
    assert taken is not with_a_bad_record
    columns = sink_for(PIPELINE).staging_columns
    assert (
        copy_spooled(cur, STAGED_ROWS, columns, Spool.of(row_chunks(staged.rows), 1 << 20), binary=True)
        == staged.rows.num_rows
    )
    cur.execute("SELECT * FROM microingest_staged_rows ORDER BY source_offset")
    landed = cur.fetchall()

    reference = RecordProcessor(PIPELINE)
    expected = []
    for i, (key, value) in enumerate(recs):
        try:
            values = reference.process(key, value)
        except BadRecord:
            continue
        ts = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=KAFKA_TIMESTAMP_MICROS + 100 + i)
        expected.append(("t", 3, 100 + i, ts, batch_id) + values)
    assert len(landed) == len(expected)
    for got, want in zip(landed, expected):
        assert len(got) == len(want)
        for a, b in zip(got, want):
            if isinstance(b, float):
                assert isinstance(a, float) and a == b and math.copysign(1, a) == math.copysign(1, b), (got, want)
            else:
                assert a == b, (got, want)


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_hostile_records_reach_postgres_as_rows_and_dead_letters_postgres_accepts(cur, mode):
    """The output of the poison-record property test (tests/unit/decode/test_hostile_records.py), COPYed as a merge
    stages them: Postgres takes every row and dead letter, and gives back each key and header as the producer sent
    it."""
    pipeline = replace(PIPELINE, sink_mode=mode)
    rng, offset, sent = random.Random(11), 0, {}
    processor = RecordProcessor(pipeline)
    for _ in range(60):
        recs = [hostile_record(rng, i) for i in range(rng.choice([1, 5, 30]))]
        staged = stage_batch(kafka_batch("t", 1, range(offset, offset + len(recs)), recs), processor, str(uuid.uuid4()))
        sent.update(zip(range(offset, offset + len(recs)), recs))
        offset += len(recs)
        copy_spooled(
            cur,
            STAGED_ROWS,
            sink_for(pipeline).staging_columns,
            Spool.of(row_chunks(staged.rows), 1 << 20),
            binary=True,
        )
        cur.copy_expert(
            copy_statement(cur, STAGED_DEAD, DEAD_LETTER_COLUMNS, binary=False), StringIO("".join(staged.dead_letters))
        )

    cur.execute(
        "SELECT source_offset, record_key, CASE WHEN left(record_key, 2) = '\\x' THEN decode(substr("
        "record_key, 3), 'hex') ELSE convert_to(record_key, 'UTF8') END FROM microingest_staged_rows"
    )
    rows = cur.fetchall()
    cur.execute('SELECT "offset", record_key, headers FROM microingest_staged_dead')
    dead = cur.fetchall()
    assert sorted([o for o, *_ in rows] + [o for o, *_ in dead]) == list(range(offset)), "each record once"
    assert rows and dead
    for o, staged_key, key_bytes in rows:
        assert (None if staged_key is None else bytes(key_bytes)) == sent[o][0], "the key's bytes, from SQL"
    for o, key, headers in dead:
        assert (None if key is None else bytes(key)) == sent[o][0]
        assert original_headers(headers) == (sent[o][2] or None)
