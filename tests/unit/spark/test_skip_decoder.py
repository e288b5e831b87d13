"""A skip's batch on the executors: every record comes out once as a dead letter (`skipped`, the operator's note),
nothing decoded, whatever the record holds; its COPY text cut into chunks as rows are."""

import random

import pyarrow as pa
import pytest

from helpers.hostile_records import hostile_record, kafka_batch
from microingest.declare.validate import parse_pipeline
from microingest.spark import decoder as spark_decoder
from microingest.spark.decoder import Decoder

NOTE = "skipped by on-call: producer v2.3 wrote text"
BATCH_ID = "00000000-0000-0000-0000-000000000002"


def skip_decoder():
    pipeline = parse_pipeline({"name": "p", "topic": "t", "target_table": "t", "schema": {"id": "string"}})
    return Decoder(pipeline, BATCH_ID, None, into_target=True, skip_note=NOTE)


def decoded(batches):
    out = pa.Table.from_batches(list(skip_decoder()(iter(batches))))
    return out.to_pydict()


def lines(chunks):
    return [line for chunk in chunks for line in chunk.decode("utf-8").split("\n") if line]


def test_every_record_is_a_skipped_dead_letter_with_the_note_and_nothing_is_decoded():
    rng = random.Random(7)
    records = [hostile_record(rng, i) for i in range(300)]
    got = decoded(
        [kafka_batch("t", 2, range(100, 250), records[:150]), kafka_batch("t", 2, range(250, 400), records[150:])]
    )
    assert sum(got["good"]) == 0 and not any(got["rows"])
    assert sum(got["bad"]) == 300
    dead = [line.split("\t") for line in lines(got["dead"])]
    assert [(f[0], f[1], f[2], int(f[3]), int(f[4])) for f in dead] == [
        ("p", BATCH_ID, "t", 2, o) for o in range(100, 400)
    ]
    assert {(f[-2], f[-1]) for f in dead} == {("skipped", NOTE)}


def test_a_large_skip_is_cut_into_chunks_that_together_hold_every_record(monkeypatch):
    monkeypatch.setattr(spark_decoder, "CHUNK_BYTES", 2_000)
    records = [(b"k", b"x" * 300) for _ in range(40)]
    got = decoded([kafka_batch("t", 0, range(40), records)])
    assert len(got["dead"]) > 5 and all(len(c) <= 2_000 for c in got["dead"])
    assert sum(got["bad"]) == 40 and [int(line.split("\t")[4]) for line in lines(got["dead"])] == list(range(40))
    assert got["spans"][1:] == [[]] * (len(got["dead"]) - 1)  # the positions ride on the first chunk


@pytest.mark.parametrize("n", [1, 2])
def test_small_skips_are_one_chunk(n):
    got = decoded([kafka_batch("t", 0, range(n), [(b"k", b"v")] * n)])
    assert len(got["dead"]) == 1 and got["bad"] == [n]
