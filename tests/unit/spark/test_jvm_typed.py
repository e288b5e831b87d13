"""The executors' half of a JVM-decoded batch whose rows stay in Spark (`spark.jvm_typed.JvmTypedDecoder`), on what
the JVM decoder itself answers for hostile records: the reference's rows and dead letters, every record counted once,
and a sampled record the JVM got wrong told to the driver by position and field."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc

from helpers.hostile_records import hostile_record, kafka_batch
from helpers.jvm_decoder import as_spark_collects, hostile_pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import stage_batch
from microingest.spark.jvm_typed import JvmTypedDecoder
from microingest.spark.typed_rows import SUMMARY, summary_column, typed_schema

BATCH_ID = "00000000-0000-0000-0000-000000000003"
EVERY = 7


def run(decoder: JvmTypedDecoder, table: pa.Table) -> tuple[pa.Table, dict]:
    out = pa.Table.from_batches(list(decoder(iter(table.to_batches(max_chunksize=400)))))
    assert out.schema == typed_schema(decoder.pipeline)
    flag = out.column(SUMMARY)
    rows, summaries = out.filter(pc.invert(flag)), out.filter(flag)
    names = ("dead", "good", "bad", "spans", "taken", "checked", "mismatch")
    summary = {name: summaries.column(summary_column(name)).to_pylist() for name in names}
    return rows, summary


def test_the_rows_are_the_reference_rows_and_each_record_is_counted_once():
    rng = random.Random(21)
    p = hostile_pipeline()
    records = [hostile_record(rng, i) for i in range(1500)]
    table = as_spark_collects(p, records, every=EVERY)
    rows, summary = run(JvmTypedDecoder(p, BATCH_ID, None, False), table)

    reference = stage_batch(kafka_batch("t", 0, range(len(records)), records), RecordProcessor(p), BATCH_ID)
    names = reference.rows.schema.names
    got = sorted(({n: r[n] for n in names} for r in rows.to_pylist()), key=lambda r: r["source_offset"])
    assert got == reference.rows.to_pylist()
    assert b"".join(summary["dead"]).decode() == "".join(reference.dead_letters)
    taken = [i for i, d in enumerate(table.column("d").to_pylist()) if d is not None]
    assert sum(summary["taken"]) == len(taken) > 500
    assert sum(summary["good"]) == reference.rows.num_rows  # the taken and the declined rows, each once
    assert sum(summary["bad"]) == len(reference.dead_letters) > 300
    assert sum(summary["checked"]) == len([i for i in taken if i % EVERY == 0]) > 50
    assert summary["mismatch"] == [None] * len(summary["mismatch"])
    spans = [(s["first"], s["last"], s["records"]) for spans in summary["spans"] for s in spans]
    assert spans == [(i, min(i + 399, 1499), min(400, 1500 - i)) for i in range(0, 1500, 400)]


def test_a_sampled_record_the_jvm_got_wrong_is_told_by_position_and_field():
    rng = random.Random(22)
    p = hostile_pipeline()
    table = as_spark_collects(p, [hostile_record(rng, i) for i in range(300)], every=EVERY)
    _, summary = run(JvmTypedDecoder(p, BATCH_ID, None, False, corrupt=True), table)
    told = [m for m in summary["mismatch"] if m]
    assert told and all("field 'id' of t[0]@" in m and "differs from the reference's" in m for m in told)
