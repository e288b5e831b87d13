"""A batch the JVM decoded (`jvm_decode.decoded_frame`), chunk by chunk as the driver collects it, made ready to
commit and spooled (`commit.spool`): the rows
the JVM took, typed, in binary COPY form; the records it declined decoded by the reference (`staged_rows.stage_batch`),
which names every dead letter; a sample of the taken records decoded by the reference too, to check the JVM's values
before anything is written; and every record read accounted for once."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from microingest import faults, settings
from microingest.batches import SOURCE_COLUMNS, DeadLetterNote, Span
from microingest.commit.copy_commit import DecodedBatch
from microingest.commit.sinks import StagedCounts
from microingest.commit.spool import Spool
from microingest.declare.pipeline import Pipeline
from microingest.decode.batch_columns import arrow_field
from microingest.decode.copy_binary import row_chunks
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import StagedBatch, rows_table, stage_batch
from microingest.errors import Refused
from microingest.spark.decoder import read_spans
from microingest.spark.jvm_self_check import check_sample, corrupted, jvm_values, log_share


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
    log_share(batch_id, made.taken, made.checked, made.declined)
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
    lead = (pipeline.name, batch_id) if into_target else (batch_id,)
    made = decoded_rows(table, processor, batch_id, lead, faults.corrupts("jvm_self_check"))
    rows, staged = made.rows, made.staged
    if into_target:
        rows = rows.select([*SOURCE_COLUMNS, *pipeline.value_columns])
    spans = read_spans(table)
    _check_counts(batch_id, spans, made.taken, staged)
    return _Chunk(
        rows=b"".join(row_chunks(rows)),  # in one pass: a chunk's bound is for Spark rows
        dead="".join(staged.dead_letters).encode("utf-8"),
        row_count=rows.num_rows,
        dead_count=len(staged.dead_letters),
        taken=made.taken,
        checked=made.checked,
        declined=made.declined,
        spans=spans,
        notes=staged.notes,
    )


@dataclass
class DecodedRows:
    """The rows of a chunk the driver collected, or of an Arrow batch on the executors (`jvm_typed`): those the JVM
    took, then those the reference staged; and what else the reference made of the records the JVM declined."""

    rows: pa.Table  # `staged_rows.rows_table`'s columns
    staged: StagedBatch
    taken: int
    checked: int
    declined: int


def decoded_rows(
    table: pa.Table, processor: RecordProcessor, batch_id: str, lead: tuple[str, ...] | None, corrupt: bool = False
) -> DecodedRows:
    """The chunk's records (KAFKA_COLUMNS with `d`) as rows: the JVM's values where it took the record, checked on
    the sample that came with its bytes (JvmMismatchError), the reference's for the rest. `corrupt`: the fault
    `jvm_self_check:corrupt`."""
    pipeline = processor.pipeline
    taken_mask = pc.is_valid(table.column("d"))
    taken = table.filter(taken_mask)
    values = jvm_values(taken.column("d"), pipeline)
    if corrupt:
        values = corrupted(values, pipeline)
    checked = check_sample(taken, values, processor, batch_id)
    declined = _one_batch(table.filter(pc.invert(taken_mask)))
    staged = (
        stage_batch(declined, processor, batch_id, lead) if declined.num_rows else StagedBatch(no_rows(pipeline), [])
    )
    rows = pa.concat_tables([rows_table(taken, batch_id, values, pipeline), staged.rows])
    return DecodedRows(rows, staged, taken.num_rows, checked, declined.num_rows)


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    combined = table.combine_chunks()
    batches = combined.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def no_rows(pipeline: Pipeline) -> pa.Table:
    """No rows, in `staged_rows.rows_table`'s columns."""
    empty = pa.RecordBatch.from_pylist(
        [],
        schema=pa.schema(
            [("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("ts_micros", pa.int64())]
        ),
    )
    types = [pa.string(), pa.bool_()] + [arrow_field(f).type for f in pipeline.schema]
    return rows_table(empty, "", [pa.array([], t) for t in types], pipeline)


def _check_counts(batch_id: str, spans: list[Span], taken: int, staged: StagedBatch) -> None:
    read = sum(span.records for span in spans)
    written = taken + staged.rows.num_rows + len(staged.dead_letters)
    if written != read:
        raise RecordCountError(
            f"batch {batch_id}: {taken} rows decoded in the JVM, {staged.rows.num_rows} by the reference and "
            f"{len(staged.dead_letters)} dead letters make {written}, not the {read} records read; nothing was written"
        )
