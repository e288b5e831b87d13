"""What the executors run for a batch whose rows pass through a SQL statement (`sql_transform`): decode each Arrow
batch of records into typed Spark rows (the statement's rows are encoded for COPY on the driver, `row_encoder`).

`TypedDecoder` yields the decoded rows (ROW_COLUMNS and the declared fields, in the staged Arrow types, a uuid as
binary) and, per Arrow batch, one summary row (`_summary` true, its row columns NULL; its own columns `_summary_*`)
with what `decoder.Decoder` would hand on besides the rows: the dead letters as COPY text, the counts, the positions
read and the first dead letters' notes; where the JVM decoded (`jvm_typed`), also the records it took, how many of
them the reference checked and the first difference found. `RowEncoder`
takes the statement's rows back to the staged types and into binary COPY chunks (`copy_binary`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema

from microingest import faults
from microingest.batches import ROW_COLUMNS
from microingest.declare.pipeline import Pipeline
from microingest.declare.sql_statement import SUMMARY_COLUMN
from microingest.decode.batch_columns import arrow_field
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import StagedBatch, stage_batch
from microingest.spark.decoder import DECODED_ARROW_SCHEMA, read_spans

SUMMARY = SUMMARY_COLUMN
# With, where the JVM decoded (`jvm_typed`), the records it took, how many of them the reference checked, and the
# first difference the check found.
_SUMMARY_OF = [DECODED_ARROW_SCHEMA.field(name) for name in ("dead", "good", "bad", "spans", "notes")] + [
    pa.field("taken", pa.int64()),
    pa.field("checked", pa.int64()),
    pa.field("mismatch", pa.string()),
]


def summary_column(name: str) -> str:
    """The typed rows' column of the summary's `name`: prefixed, so a declared field may be called "notes"
    (`sql_statement.internal` keeps fields off the prefix)."""
    return f"{SUMMARY}_{name}"


_SUMMARY_FIELDS = [pa.field(SUMMARY, pa.bool_())] + [f.with_name(summary_column(f.name)) for f in _SUMMARY_OF]
# The summary rows as the driver reads them, by the summary's own names.
SUMMARY_SELECT = [f"`{summary_column(f.name)}` AS `{f.name}`" for f in _SUMMARY_OF]


def staged_schema(pipeline: Pipeline) -> pa.Schema:
    """The staged rows' Arrow schema (`staged_rows.rows_table`): the row layout, then the declared fields."""
    layout = [
        pa.field("source_topic", pa.string()),
        pa.field("source_partition", pa.int32()),
        pa.field("source_offset", pa.int64()),
        pa.field("kafka_timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("batch_id", pa.string()),
        pa.field("record_key", pa.string()),
        pa.field("is_tombstone", pa.bool_()),
    ]
    assert [f.name for f in layout] == list(ROW_COLUMNS)
    return pa.schema(layout + [arrow_field(f) for f in pipeline.schema])


def typed_schema(pipeline: Pipeline) -> pa.Schema:
    """What TypedDecoder yields: the staged rows' columns as Spark reads Arrow (a uuid's 16 bytes as binary of any
    length: Spark refuses fixed-size binary; `RowEncoder` casts them back), then the summary's."""
    staged = [f.with_type(pa.binary()) if pa.types.is_fixed_size_binary(f.type) else f for f in staged_schema(pipeline)]
    return pa.schema(staged + _SUMMARY_FIELDS)


class TypedDecoder:
    """A mapInArrow function; pickled to the executors, so it holds only plain settings. Dead letters' lines start
    with (pipeline, batch id) when the rows go straight into the target (`into_target`), else with the batch id."""

    def __init__(self, pipeline: Pipeline, batch_id: str, registry: dict[str, str] | None, into_target: bool):
        self.pipeline, self.batch_id, self.registry, self.into_target = pipeline, batch_id, registry, into_target
        self.faults = faults.executor_faults()

    @property
    def spark_schema(self):
        return from_arrow_schema(typed_schema(self.pipeline))

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        processor = RecordProcessor(self.pipeline, self.registry)
        lead = (self.pipeline.name, self.batch_id) if self.into_target else None
        schema = typed_schema(self.pipeline)
        staged_columns = len(schema) - len(_SUMMARY_FIELDS)
        for batch in batches:
            if not batch.num_rows:
                continue
            staged, jvm = self.decoded(batch, processor, lead)
            rows = staged.rows.combine_chunks()
            n = rows.num_rows
            columns = [rows.column(i).cast(schema.field(i).type) for i in range(staged_columns)]
            columns += [pa.repeat(pa.scalar(False), n)] + [pa.nulls(n, f.type) for f in _SUMMARY_FIELDS[1:]]
            yield from pa.Table.from_arrays(columns, schema=schema).to_batches()
            summary = {
                "dead": "".join(staged.dead_letters).encode("utf-8"),
                "good": n,
                "bad": len(staged.dead_letters),
                "spans": [s._asdict() for s in read_spans(batch)],
                "notes": [note._asdict() for note in staged.notes],
                **jvm,
            }
            row = {SUMMARY: True, **{summary_column(k): v for k, v in summary.items()}}
            yield pa.RecordBatch.from_pylist([row], schema=schema)
        faults.crash_point("executor_after_decode", self.faults)

    def decoded(
        self, batch: pa.RecordBatch, processor: RecordProcessor, lead: tuple[str, ...] | None
    ) -> tuple[StagedBatch, dict]:
        """The batch's records staged by the reference, and what the summary says of the JVM's share (none)."""
        return stage_batch(batch, processor, self.batch_id, lead), {}
