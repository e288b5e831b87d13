"""The driver's half of a JVM-decoded batch (`spark.jvm_collected`), on what the JVM decoder itself answers for
hostile records (its jar run without Spark): the same rows and dead letters as the reference path gives for the same
records, every record once; and a sampled record whose JVM values differ from the reference's refuses the batch."""

from __future__ import annotations

import random
from datetime import datetime, timezone

import pyarrow as pa
import pytest

from helpers.copy_rows import tuples
from helpers.hostile_records import hostile_record, kafka_batch
from helpers.jvm_decoder import as_spark_collects, hostile_pipeline
from microingest.batches import SOURCE_COLUMNS
from microingest.decode.copy_binary import row_chunks
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import stage_batch
from microingest.spark.jvm_collected import collected
from microingest.spark.jvm_self_check import JvmMismatchError

BATCH_ID = "00000000-0000-0000-0000-000000000002"
STARTED = datetime(2026, 11, 26, tzinfo=timezone.utc)


def lines(chunks: list[bytes]) -> list[bytes]:
    return sorted(b"".join(chunks).splitlines(keepends=True))


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
@pytest.mark.parametrize("into_target", [False, True])
@pytest.mark.parametrize("memory_mb", ["64", "0.01"])  # held in memory; past 10 KiB, in the temporary file
def test_the_same_rows_and_dead_letters_as_the_reference_path(mode, into_target, memory_mb, monkeypatch):
    monkeypatch.setenv("MICROINGEST_BATCH_MEMORY_MB", memory_mb)
    rng = random.Random(11)
    p = hostile_pipeline(sink_mode=mode)
    records = [hostile_record(rng, i) for i in range(1500)]
    table = as_spark_collects(p, records, every=7)
    # in chunks, as Spark Connect hands a batch over
    got = collected(
        [table.slice(0, 1), table.slice(1, 700), table.slice(701, 0), table.slice(701)],
        RecordProcessor(p),
        BATCH_ID,
        into_target,
        STARTED,
    )
    assert got.rows.on_disk == (memory_mb != "64")

    lead = ("p", BATCH_ID) if into_target else (BATCH_ID,)
    reference = stage_batch(kafka_batch("t", 0, range(len(records)), records), RecordProcessor(p), BATCH_ID, lead)
    rows = reference.rows
    if into_target:
        rows = rows.select([*SOURCE_COLUMNS, *p.value_columns])
    assert tuples([got.rows.read_all()]) == tuples(list(row_chunks(rows)))
    assert lines([got.dead.read_all()]) == lines([line.encode() for line in reference.dead_letters])
    assert (got.counts.rows, got.counts.dead) == (rows.num_rows, len(reference.dead_letters))
    assert got.counts.rows > 500 and got.counts.dead > 300  # both kinds of record were there
    assert [(s.first, s.last, s.records) for s in got.spans] == [(0, 0, 1), (1, 700, 700), (701, 1499, 799)]


def test_a_sampled_record_the_jvm_got_wrong_refuses_the_batch(monkeypatch):
    rng = random.Random(12)
    p = hostile_pipeline()
    table = as_spark_collects(p, [hostile_record(rng, i) for i in range(300)], every=1)
    collected([table], RecordProcessor(p), BATCH_ID, False, STARTED)  # as it came: no complaint
    monkeypatch.setenv("MICROINGEST_FAULT", "jvm_self_check:corrupt")
    with pytest.raises(JvmMismatchError, match="field 'id' of t\\[0\\]@"):
        collected([table.slice(0, 10), table.slice(10)], RecordProcessor(p), BATCH_ID, False, STARTED)


def test_the_refusal_names_the_field_and_the_record_never_the_value():
    rng = random.Random(13)
    p = hostile_pipeline()
    table = as_spark_collects(p, [hostile_record(rng, i) for i in range(300)], every=1)
    d = table.column("d").to_pylist()
    first = next(i for i, v in enumerate(d) if v is not None)
    d[first] = {**d[first], "f0": d[first]["f0"] + "secret"}
    changed = table.set_column(table.schema.get_field_index("d"), "d", pa.array(d, table.schema.field("d").type))
    with pytest.raises(JvmMismatchError, match=f"field 'id' of t\\[0\\]@{first} differs") as refused:
        collected([changed], RecordProcessor(p), BATCH_ID, False, STARTED)
    assert "secret" not in str(refused.value)
