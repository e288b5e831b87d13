"""What the executors run for a batch that is written once: decode each Arrow batch of records and hand back, as
Spark rows, its rows in binary COPY form (`copy_binary`), its dead letters as COPY text, and the positions it read
(`read_proof`). Nothing here touches Postgres: the driver (or Spark Connect client) COPYs the chunks inside the commit
transaction, so a retried or speculative task leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import from_arrow_schema

from microingest import faults, settings
from microingest.batches import SOURCE_COLUMNS, DeadLetterNote, Span
from microingest.commit.copy_commit import DecodedBatch
from microingest.commit.sinks import SKIPPED, StagedCounts
from microingest.commit.spool import Spool
from microingest.declare.pipeline import Pipeline
from microingest.decode.copy_binary import row_chunks
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import dead_letters, stage_batch

# The spans (read_proof) and the dead letters' notes travel typed, so the driver reads them back without parsing text.
_ARROW_SPAN = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("first", pa.int64()),
        ("last", pa.int64()),
        ("records", pa.int64()),
    ]
)
_ARROW_NOTE = pa.struct(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("error_class", pa.string()),
        ("message", pa.string()),
    ]
)
DECODED_ARROW_SCHEMA = pa.schema(
    [
        ("rows", pa.binary()),
        ("dead", pa.binary()),
        ("good", pa.int64()),
        ("bad", pa.int64()),
        ("spans", pa.list_(_ARROW_SPAN)),
        ("notes", pa.list_(_ARROW_NOTE)),
    ]
)
# What mapInArrow is told the decoders yield: the same layout, in Spark's types, written once.
DECODED_SCHEMA = from_arrow_schema(DECODED_ARROW_SCHEMA)
# A chunk beyond this is split, so no single Spark row grows past what Spark Connect sends in one message.
CHUNK_BYTES = 8 << 20


class Decoder:
    """A mapInArrow function; pickled to the executors, so it holds only plain settings.

    `into_target`: the rows go straight into an append target (its columns, and dead letters that name the
    pipeline); otherwise they keep the staged layout, for a merge inside the commit (`copy_commit`). `skip_note`: a
    skip's batch, whose every record is a dead letter (`skipped`, the note its message), nothing decoded."""

    def __init__(
        self,
        pipeline: Pipeline,
        batch_id: str,
        registry: dict[str, str] | None,
        into_target: bool,
        skip_note: str | None = None,
    ):
        self.pipeline, self.batch_id, self.registry, self.into_target = pipeline, batch_id, registry, into_target
        self.skip_note = skip_note
        self.faults = faults.executor_faults()

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        processor = RecordProcessor(self.pipeline, self.registry)
        lead = (self.pipeline.name, self.batch_id) if self.into_target else None
        # An append target has the source position and the declared values of the staged layout.
        target_columns = [*SOURCE_COLUMNS, *self.pipeline.value_columns]
        for batch in batches:
            if not batch.num_rows:
                continue
            if self.skip_note is not None:
                yield _skipped(batch, (self.pipeline.name, self.batch_id), self.skip_note, bool(self.pipeline.mask))
                continue
            staged = stage_batch(batch, processor, self.batch_id, lead)
            rows = staged.rows.select(target_columns) if self.into_target else staged.rows
            first, *rest = list(row_chunks(rows, CHUNK_BYTES)) or [b""]
            # The counts, dead letters and positions ride on the first chunk; the rest carry only rows.
            yield pa.RecordBatch.from_pylist(
                [
                    {
                        "rows": first,
                        "dead": "".join(staged.dead_letters).encode("utf-8"),
                        "good": rows.num_rows,
                        "bad": len(staged.dead_letters),
                        "spans": [s._asdict() for s in read_spans(batch)],
                        "notes": [n._asdict() for n in staged.notes],
                    }
                ]
                + [{"rows": chunk, "dead": b"", "good": 0, "bad": 0, "spans": [], "notes": []} for chunk in rest],
                schema=DECODED_ARROW_SCHEMA,
            )
        faults.crash_point("executor_after_decode", self.faults)


def _skipped(batch: pa.RecordBatch, lead: tuple[str, str], note: str, withheld: bool) -> pa.RecordBatch:
    """Every record a dead letter: their COPY text cut into chunks as rows are, the count and positions on the
    first."""
    dead = dead_letters(batch, lead, SKIPPED, note, withheld)
    first, *rest = text_chunks(dead)
    return pa.RecordBatch.from_pylist(
        [
            {
                "rows": b"",
                "dead": first,
                "good": 0,
                "bad": len(dead),
                "spans": [s._asdict() for s in read_spans(batch)],
                "notes": [],  # a skip's dead letters are what the operator asked for: no batch is refused over them
            }
        ]
        + [{"rows": b"", "dead": chunk, "good": 0, "bad": 0, "spans": [], "notes": []} for chunk in rest],
        schema=DECODED_ARROW_SCHEMA,
    )


def text_chunks(lines: list[str]) -> list[bytes]:
    chunks: list[bytes] = []
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        data = line.encode("utf-8")
        if chunk and size + len(data) > CHUNK_BYTES:
            chunks.append(b"".join(chunk))
            chunk, size = [], 0
        chunk.append(data)
        size += len(data)
    return chunks + [b"".join(chunk)]


def read_spans(batch: pa.RecordBatch) -> list[Span]:
    """The batch's positions as maximal runs of one topic and partition with strictly rising offsets: a position
    read twice shows up as two spans that overlap."""
    topic, partition, offset = batch.column("topic"), batch.column("partition"), batch.column("offset")
    n = batch.num_rows
    if n == 0:
        return []
    breaks = pc.or_(
        pc.or_(pc.not_equal(topic[1:], topic[:-1]), pc.not_equal(partition[1:], partition[:-1])),
        pc.less_equal(offset[1:], offset[:-1]),
    )
    starts = [0] + [i + 1 for i in pc.indices_nonzero(breaks).to_pylist()]
    ends = starts[1:] + [n]
    return [
        Span(topic[s].as_py(), partition[s].as_py(), offset[s].as_py(), offset[e - 1].as_py(), e - s)
        for s, e in zip(starts, ends)
    ]


def collected(tables: Iterable[pa.Table], decoder: Decoder, started_at: datetime) -> DecodedBatch:
    """What the driver collects from the Decoders (Arrow tables with DECODED_SCHEMA), spooled chunk by chunk as it
    comes, ready to commit."""
    memory = settings.batch_memory_bytes()
    rows, dead = Spool(memory), Spool(memory)
    good = bad = chunks = 0
    spans: list[Span] = []
    notes: list[DeadLetterNote] = []
    try:
        for table in tables:
            for chunk in table.column("rows").to_pylist():
                rows.write(chunk)
            for chunk in table.column("dead").to_pylist():
                dead.write(chunk)
            good += pc.sum(table.column("good")).as_py() or 0
            bad += pc.sum(table.column("bad")).as_py() or 0
            spans += [Span(**s) for chunk_spans in table.column("spans").to_pylist() for s in chunk_spans]
            notes += [DeadLetterNote(**n) for chunk_notes in table.column("notes").to_pylist() for n in chunk_notes]
            chunks += 1
    except BaseException:
        rows.close()
        dead.close()
        raise
    return DecodedBatch(
        batch_id=decoder.batch_id,
        rows=rows,
        dead=dead,
        counts=StagedCounts(good, bad),
        spans=spans,
        notes=notes,
        chunks=chunks,
        into_target=decoder.into_target,
        started_at=started_at,
        decoded_at=datetime.now(timezone.utc),
    )
