"""The typed rows of a batch whose rows stay in Spark for its statement, checks and masks (`sql_transform`), from the
JVM decoder (`jvm_decode.decoded_frame`) where it took the record: its struct's columns, in Spark SQL, with no Python
worker between. The records it declined go to the reference on the executors (`JvmTypedDecoder`), which also checks a
sample of those taken (`jvm_self_check`) and writes each Arrow batch's summary as `TypedDecoder` does, counting every
record read once. Both halves have `typed_rows.typed_schema`'s columns."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from microingest.declare.pipeline import Pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import StagedBatch, stage_batch
from microingest.spark.jvm_decode import JvmDecoding, decoded_frame
from microingest.spark.jvm_self_check import JvmMismatchError, check_sample, corrupted, jvm_values
from microingest.spark.typed_rows import SUMMARY, TypedDecoder, staged_schema

KAFKA_COLUMNS = ("topic", "partition", "offset", "ts_micros", "key", "value", "headers")
_TAKEN = "taken"


class JvmTypedDecoder(TypedDecoder):
    """TypedDecoder over `decoded_frame`'s records with a `taken` flag: stages those the JVM declined, counts those it
    took as decoded, and checks the sampled ones (their `d` and bytes present) against the reference. `corrupt`: the
    fault `jvm_self_check:corrupt`, decided on the driver."""

    def __init__(self, pipeline: Pipeline, batch_id: str, registry, into_target: bool, corrupt: bool = False):
        super().__init__(pipeline, batch_id, registry, into_target)
        self.corrupt = corrupt

    def decoded(self, batch: pa.RecordBatch, processor: RecordProcessor, lead) -> tuple[StagedBatch, dict]:
        taken = batch.column(_TAKEN)
        declined = batch.filter(pc.invert(taken)).select(KAFKA_COLUMNS)
        staged = (
            stage_batch(declined, processor, self.batch_id, lead)
            if declined.num_rows
            else StagedBatch(staged_schema(self.pipeline).empty_table(), [])
        )
        sampled = pa.Table.from_batches([batch.filter(pc.is_valid(batch.column("d")))])
        values = jvm_values(sampled.column("d"), self.pipeline)
        if self.corrupt:
            values = corrupted(values, self.pipeline)
        checked, mismatch = 0, None
        try:
            checked = check_sample(sampled, values, processor, self.batch_id)
        except JvmMismatchError as exc:  # told to the driver in the summary, which refuses the batch
            mismatch = str(exc)
        return staged, {"taken": pc.sum(taken).as_py() or 0, "checked": checked, "mismatch": mismatch}


def jvm_typed(frame, jvm: JvmDecoding, every: int, decoder: JvmTypedDecoder):
    """The typed rows and summaries of the batch read as `frame`, and the decoded records they are made from,
    persisted (both halves read them: the caller unpersists them with the rows). `every`: one taken record in so
    many is checked (`jvm_decode.sample_every`)."""
    from pyspark.sql import functions as F

    decoded = decoded_frame(frame, jvm, every).persist()
    declined = decoded.select(
        *KAFKA_COLUMNS,
        F.when(F.col("d").isNotNull() & (F.col("offset") % every == 0), F.col("d")).alias("d"),
        F.col("d").isNotNull().alias(_TAKEN),
    ).mapInArrow(decoder, decoder.spark_schema)
    return _taken(decoded, decoder).unionByName(declined), decoded


def _taken(decoded, decoder: JvmTypedDecoder):
    """The rows of the records the JVM took, in the typed schema's Spark types: a timestamp from its microseconds,
    every other field as the struct has it (the types `jvm_spec` gives are the staged ones)."""
    from pyspark.sql import functions as F

    pipeline = decoder.pipeline
    made = {
        "source_topic": F.col("topic"),
        "source_partition": F.col("partition"),
        "source_offset": F.col("offset"),
        "kafka_timestamp": F.timestamp_micros(F.col("ts_micros")),
        "batch_id": F.lit(decoder.batch_id),
        "record_key": F.col("d.key"),
        "is_tombstone": F.lit(False),
        SUMMARY: F.lit(False),
    }
    for i, field in enumerate(pipeline.schema):
        value = F.col(f"d.f{i}")
        made[field.name] = F.timestamp_micros(value) if field.type == "timestamp" else value
    columns = [made.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in decoder.spark_schema.fields]
    return decoded.where(F.col("d").isNotNull()).select(*columns)
