"""The typed rows of a batch whose rows stay in Spark for its statement, checks and masks (`sql_transform`), from the
JVM decoder where it took the record (`jvm_decode.decoded_frame`): its struct's columns become the typed columns by
Arrow casts alone, no record decoded in Python; the records it declined are staged by the reference. Each Arrow batch
also checks a sample of the records the JVM took against the reference (`jvm_self_check`) and ends with its summary
as `TypedDecoder`'s does, which tells the driver any difference."""

from __future__ import annotations

import pyarrow as pa

from microingest.declare.pipeline import Pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import StagedBatch
from microingest.spark.jvm_collected import decoded_rows, no_rows
from microingest.spark.jvm_self_check import JvmMismatchError
from microingest.spark.typed_rows import TypedDecoder


class JvmTypedDecoder(TypedDecoder):
    """TypedDecoder over `decoded_frame`'s records: the JVM's values where it took the record, the reference's for
    the rest. `corrupt`: the fault `jvm_self_check:corrupt`, decided on the driver."""

    def __init__(self, pipeline: Pipeline, batch_id: str, registry, into_target: bool, corrupt: bool = False):
        super().__init__(pipeline, batch_id, registry, into_target)
        self.corrupt = corrupt

    def decoded(self, batch: pa.RecordBatch, processor: RecordProcessor, lead) -> tuple[StagedBatch, dict]:
        try:
            made = decoded_rows(pa.Table.from_batches([batch]), processor, self.batch_id, lead, self.corrupt)
        except JvmMismatchError as exc:  # told to the driver in the summary, which refuses the batch
            return StagedBatch(no_rows(self.pipeline), []), {"mismatch": str(exc)}
        staged = StagedBatch(made.rows, made.staged.dead_letters, made.staged.notes)
        return staged, {"taken": made.taken, "checked": made.checked}
