"""A batch the JVM decoded (`jvm_decode.decoded_frame`), chunk by chunk as the driver collects it, made ready to
commit and spooled (`commit.spool`): the rows
the JVM took, typed, in binary COPY form; the records it declined decoded by the reference (`staged_rows.stage_batch`),
which names every dead letter; a sample of the taken records decoded by the reference too, to check the JVM's values
before anything is written; and every record read accounted for once."""

from __future__ import annotations

import dataclasses
import logging
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microingest import faults, settings
from microingest.batches import SOURCE_COLUMNS, DeadLetterNote, Span
from microingest.commit.copy_commit import DecodedBatch
from microingest.commit.sinks import StagedCounts
from microingest.commit.spool import Spool
from microingest.declare.pipeline import Pipeline
from microingest.decode.batch_columns import arrow_column, arrow_field
from microingest.decode.copy_binary import row_chunks
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import StagedBatch, kafka_headers, rows_table, stage_batch
from microingest.errors import Refused
from microingest.spark.decoder import read_spans

log = logging.getLogger(__name__)


class JvmMismatchError(Refused):
    """A record the JVM decoded came out of the reference with other values. Nothing of the batch was written; the job
    decodes it again by the reference alone."""


class RecordCountError(Refused):
    """The batch's rows and dead letters do not add up to the records it read. Nothing of it was written."""


def collected(
    tables: Iterable[pa.Table],
    processor: RecordProcessor,
    batch_id: str,
    into_target: bool,
    started_at: datetime,
) -> DecodedBatch:
    """The collected chunks (KAFKA_COLUMNS with `d`, the JVM's struct, NULL where it declined) as a DecodedBatch: each
    checked, made COPY data and spooled as it comes, so the driver never holds the whole batch."""
    memory = settings.batch_memory_bytes()
    rows, dead = Spool(memory), Spool(memory)
    made = _Made()
    try:
        for table in tables:
            made.add(_chunk(table, processor, batch_id, into_target), rows, dead)
            made.chunks += 1
    except BaseException:
        rows.close()
        dead.close()
        raise
    log.info(
        "batch %s: %d records decoded in the JVM (%d of them checked against the reference), %d by the reference",
        batch_id,
        made.taken,
        made.checked,
        made.declined,
    )
    return DecodedBatch(
        batch_id=batch_id,
        rows=rows,
        dead=dead,
        counts=StagedCounts(made.rows, made.dead),
        spans=made.spans,
        notes=made.notes,
        decoded_in_jvm=made.taken,
        chunks=made.chunks,
        into_target=into_target,
        started_at=started_at,
        decoded_at=datetime.now(timezone.utc),
    )


@dataclass
class _Chunk:
    """One collected chunk made ready to commit."""

    rows: bytes  # binary COPY tuples
    dead: bytes  # COPY text lines
    row_count: int
    dead_count: int
    taken: int
    checked: int
    declined: int
    spans: list[Span]
    notes: list[DeadLetterNote]


@dataclass
class _Made:
    """What the chunks of a batch made, summed."""

    chunks: int = 0
    rows: int = 0
    dead: int = 0
    taken: int = 0
    checked: int = 0
    declined: int = 0
    spans: list[Span] = dataclasses.field(default_factory=list)
    notes: list[DeadLetterNote] = dataclasses.field(default_factory=list)

    def add(self, chunk: _Chunk, rows: Spool, dead: Spool) -> None:
        rows.write(chunk.rows)
        dead.write(chunk.dead)
        self.rows += chunk.row_count
        self.dead += chunk.dead_count
        self.taken += chunk.taken
        self.checked += chunk.checked
        self.declined += chunk.declined
        self.spans += chunk.spans
        self.notes += chunk.notes


def _chunk(table: pa.Table, processor: RecordProcessor, batch_id: str, into_target: bool) -> _Chunk:
    pipeline = processor.pipeline
    taken_mask = pc.is_valid(table.column("d"))
    taken = table.filter(taken_mask)
    values = _typed(taken.column("d"), pipeline)
    if faults.corrupts("jvm_self_check"):
        values = _corrupted(values, pipeline)
    checked = _check_sample(taken, values, processor, batch_id)
    declined = _one_batch(table.filter(pc.invert(taken_mask)))
    lead = (pipeline.name, batch_id) if into_target else (batch_id,)
    staged = (
        stage_batch(declined, processor, batch_id, lead) if declined.num_rows else StagedBatch(_no_rows(pipeline), [])
    )
    rows = pa.concat_tables([rows_table(taken, batch_id, values, pipeline), staged.rows])
    if into_target:
        rows = rows.select([*SOURCE_COLUMNS, *pipeline.value_columns])
    spans = read_spans(table)
    _check_counts(batch_id, spans, taken.num_rows, staged)
    return _Chunk(
        rows=b"".join(row_chunks(rows)),  # in one pass: a chunk's bound is for Spark rows
        dead="".join(staged.dead_letters).encode("utf-8"),
        row_count=rows.num_rows,
        dead_count=len(staged.dead_letters),
        taken=taken.num_rows,
        checked=checked,
        declined=declined.num_rows,
        spans=spans,
        notes=staged.notes,
    )


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    combined = table.combine_chunks()
    batches = combined.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _typed(d: pa.ChunkedArray, pipeline: Pipeline) -> list[pa.ChunkedArray]:
    """(record_key, is_tombstone, value columns...) of the taken records, in the reference's Arrow types."""
    tombstones = pa.chunked_array([pa.repeat(pa.scalar(False), len(chunk)) for chunk in d.chunks], pa.bool_())
    columns = [pc.struct_field(d, [0]), tombstones]
    for i, field in enumerate(pipeline.schema):
        # A timestamp comes as its microseconds, a UUID as its 16 bytes in a binary of any length.
        columns.append(pc.struct_field(d, [i + 1]).cast(arrow_field(field).type))
    return columns


def _corrupted(values: list[pa.ChunkedArray], pipeline: Pipeline) -> list[pa.ChunkedArray]:
    """The fault `jvm_self_check:corrupt`: every value of the first text field ends in "~", as a wrong decoder's
    would differ."""
    at = 2 + next(i for i, f in enumerate(pipeline.schema) if f.type == "string")
    return [*values[:at], pc.binary_join_element_wise(values[at], "~", ""), *values[at + 1 :]]


def _no_rows(pipeline: Pipeline) -> pa.Table:
    empty = pa.RecordBatch.from_pylist(
        [],
        schema=pa.schema(
            [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("ts_micros", pa.int64())]
        ),
    )
    types = [pa.string(), pa.bool_()] + [arrow_field(f).type for f in pipeline.schema]
    return rows_table(empty, "", [pa.array([], t) for t in types], pipeline)


def _check_sample(taken: pa.Table, values: list[pa.ChunkedArray], processor: RecordProcessor, batch_id: str) -> int:
    """The taken records that came back with their bytes, decoded again by the reference: the same values, or the
    batch is refused before anything is written."""
    sampled = pc.indices_nonzero(pc.is_valid(taken.column("value")))
    records = taken.select(["topic", "partition", "offset", "key", "value", "headers"]).take(sampled).to_pylist()
    wheres = [f"{r['topic']}[{r['partition']}]@{r['offset']}" for r in records]
    processed = []
    for record, where in zip(records, wheres, strict=True):
        try:
            processed.append(processor.process(record["key"], record["value"], kafka_headers(record["headers"])))
        except BadRecord as exc:
            raise JvmMismatchError(
                f"batch {batch_id}: the JVM decoded {where}, which the reference makes a dead letter "
                f"({exc.error_class})"
            ) from None
    schema = processor.pipeline.schema
    # The reference's values in their staged form (a UUID's bytes, a decimal at its scale), as the JVM's come.
    by_column = list(zip(*processed)) or [()] * (2 + len(schema))
    expected = [list(by_column[0]), list(by_column[1])]
    expected += [arrow_column(field, column).to_pylist() for field, column in zip(schema, by_column[2:])]
    names = ["record key", "tombstone"] + [f"field '{f.name}'" for f in schema]
    for name, column, wanted in zip(names, values, expected, strict=True):
        for where, a, b in zip(wheres, column.take(sampled).to_pylist(), wanted, strict=True):
            if not _same(a, b):
                raise JvmMismatchError(f"batch {batch_id}: the JVM's {name} of {where} differs from the reference's")
    return len(sampled)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):  # an array's items
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, float)
            and isinstance(b, float)
            and struct.pack(">d", a) == struct.pack(">d", b)
            and not math.isnan(a)
        )
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a.as_tuple() == b.as_tuple()  # the same digits at the same scale
    return type(a) is type(b) and a == b


def _check_counts(batch_id: str, spans: list[Span], taken: int, staged: StagedBatch) -> None:
    read = sum(span.records for span in spans)
    written = taken + staged.rows.num_rows + len(staged.dead_letters)
    if written != read:
        raise RecordCountError(
            f"batch {batch_id}: {taken} rows decoded in the JVM, {staged.rows.num_rows} by the reference and "
            f"{len(staged.dead_letters)} dead letters make {written}, not the {read} records read; nothing was written"
        )
