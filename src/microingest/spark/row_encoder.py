"""The rows of a batch's statement (`sql_transform`) as COPY data, on the driver as it collects them (`arrow_chunks`):
Spark's types back to the staged ones, the pipeline's masks applied (`decode.masks`), then binary COPY tuples
(`copy_binary`), spooled (`commit.spool`). On the driver rather than in Python workers: the rows come to it anyway, and
each executor's pass would send them out of the JVM and their COPY data back in before the driver collected it; a
keyed mask's key stays on the driver too."""

from __future__ import annotations

import pyarrow as pa

from microingest.batches import SOURCE_COLUMNS
from microingest.commit.spool import Spool
from microingest.declare.pipeline import Pipeline
from microingest.decode.copy_binary import row_chunks
from microingest.decode.masks import masked
from microingest.spark.arrow_chunks import arrow_chunks
from microingest.spark.typed_rows import staged_schema


class RowEncoder:
    """A statement's rows (the staged columns, in Spark's types) made ready for COPY. `mask_key`: a keyed hash's."""

    def __init__(self, pipeline: Pipeline, into_target: bool, mask_key: bytes | None = None):
        self.pipeline, self.into_target, self.mask_key = pipeline, into_target, mask_key
        self.schema = staged_schema(pipeline)

    def __repr__(self) -> str:  # whatever prints the encoder shows no key
        return f"RowEncoder({self.pipeline.name})"

    def rows(self, table: pa.Table) -> pa.Table:
        """`table`'s rows in the staged types, masked, in the target's columns (`into_target`) or the staging's."""
        # Spark's timestamps carry the session's zone, its binary no width, and a json field's mark for the encoder
        # is the schema's own.
        rows = table.select(self.schema.names).cast(self.schema)
        for name, method in self.pipeline.mask:
            at = rows.schema.get_field_index(name)
            rows = rows.set_column(at, self.schema.field(name), masked(rows.column(name), method, self.mask_key))
        return rows.select([*SOURCE_COLUMNS, *self.pipeline.value_columns]) if self.into_target else rows

    def spooled(self, frame, memory: int) -> tuple[Spool, int, int]:
        """The frame's rows as binary COPY data, spooled chunk by chunk as the driver collects them (`memory`: the
        spool's bound in memory): the spool, its rows and the chunks they came in."""
        spool, rows, chunks = Spool(memory), 0, 0
        try:
            for table in arrow_chunks(frame):
                encoded = self.rows(table)
                for data in row_chunks(encoded):
                    spool.write(data)
                rows += encoded.num_rows
                chunks += 1
        except BaseException:
            spool.close()
            raise
        return spool, rows, chunks
