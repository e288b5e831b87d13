"""What the executors run for a batch: once per Spark partition, decode its records and stage the results (good rows
into the pipeline's staging table, bad ones into the staged dead letters) in one Postgres transaction."""

from __future__ import annotations

import itertools
import os
from typing import Any, BinaryIO, Iterator, TextIO

from microingest import faults
from microingest.commit.staging import StagedCounts, stage_part
from microingest.declare.pipeline import Pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import csv_bytes, stage_batch

STAGED_SCHEMA = "rows long, dead long, stager long"  # what each Spark partition's Stager returns


class Stager:
    """A mapInArrow function; pickled to the executors, so it holds only plain settings."""

    def __init__(self, postgres: dict[str, Any], pipeline: Pipeline, batch_id: str,
                 registry: dict[str, str] | None = None):
        self.postgres, self.pipeline, self.batch_id, self.registry = postgres, pipeline, batch_id, registry

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        batches = (b for b in batches if b.num_rows)
        head = next(batches, None)
        first = None if head is None else tuple(head.column(i)[0].as_py() for i in range(3))

        def decode(rows: BinaryIO, dead: TextIO) -> StagedCounts:
            processor = RecordProcessor(self.pipeline, self.registry)
            good = bad = 0
            for batch in itertools.chain([head], batches):
                staged = stage_batch(batch, processor, self.batch_id)
                rows.write(csv_bytes(staged.rows))
                dead.writelines(staged.dead_letters)
                good, bad = good + staged.rows.num_rows, bad + len(staged.dead_letters)
            return StagedCounts(good, bad)

        counts = stage_part(self.postgres, self.pipeline, self.batch_id, first, decode)
        faults.crash_point("executor_after_stage")
        # The parent of a Python worker is its executor's pyspark daemon: one per executor JVM.
        yield pa.RecordBatch.from_pydict({"rows": [counts.rows], "dead": [counts.dead], "stager": [os.getppid()]},
                                         schema=pa.schema([(c, pa.int64()) for c in ("rows", "dead", "stager")]))
