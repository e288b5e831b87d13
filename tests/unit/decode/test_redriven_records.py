"""A redrive decodes a dead letter from what the dead-letter table keeps of its record: that must be the record Kafka
gave, bit for bit, or a redrive would decode something else. Differential: every hostile record the stager makes a
dead letter of, read back from its COPY text and staged again by the same declaration, makes the same dead letter."""

from __future__ import annotations

import json
import random
from datetime import datetime

import pytest

from helpers.hostile_records import HOSTILE_HEADERS, SCHEMA, hostile_record, kafka_batch
from microingest.batches import StoredRecord
from microingest.declare.validate import parse_pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import (
    kafka_headers,
    spark_headers,
    stage_batch,
    stored_headers,
    stored_records_batch,
)

BATCH_ID = "00000000-0000-0000-0000-000000000002"


def stored(line: str) -> StoredRecord:
    """A dead letter's COPY text line as Postgres would keep it, read back as the redrive reads its row."""
    _, topic, partition, offset, ts, key, value, headers, _, _ = [_copy_field(f) for f in line[:-1].split("\t")]
    return StoredRecord(
        topic,
        int(partition),
        int(offset),
        None if ts is None else datetime.fromisoformat(ts),
        None if key is None else bytes.fromhex(key[2:]),
        None if value is None else bytes.fromhex(value[2:]),
        None if headers is None else json.loads(headers),
    )


def _copy_field(field: str) -> str | None:
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


@pytest.mark.parametrize("headers", [h for h in HOSTILE_HEADERS if h])
def test_stored_headers_go_back_to_what_kafka_gave(headers):
    assert kafka_headers(spark_headers(stored_headers(headers))) == headers


@pytest.mark.parametrize("transform", [None, "microingest.transforms:require_positive_amount"])
def test_a_dead_letter_staged_again_from_its_stored_record_is_the_same_dead_letter(transform):
    pipeline = parse_pipeline(
        {
            "name": "p",
            "topic": "t",
            "target_table": "t",
            "schema": SCHEMA,
            "max_value_bytes": 3000,
            "transform": transform,
        }
    )
    processor = RecordProcessor(pipeline)
    rng = random.Random(40)
    records = [hostile_record(rng, i) for i in range(600)]
    first = stage_batch(kafka_batch("t", 3, range(1000, 1600), records), processor, BATCH_ID)
    assert len(first.dead_letters) > 100
    again = stage_batch(stored_records_batch([stored(line) for line in first.dead_letters]), processor, BATCH_ID)
    assert again.dead_letters == first.dead_letters and again.rows.num_rows == 0
