"""The body of the Spark ingest job: a run's plan, batch by batch; each batch read, decoded, staged and committed.

Executors decode and stage their Spark partitions in parallel (`Stager`): good records into the pipeline's staging
table, bad ones (see `records`) into the staged dead letters. The driver checks the dead-letter guard and commits each
batch in one Postgres transaction (`commit.commit_batch`), then goes on with the next batch of the run in the same
Spark application (`run_plan`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from typing import Any, BinaryIO, Iterator, Sequence, TextIO

from microingest import faults
from microingest.commit.history import RunInfo, committed_by_run
from microingest.commit.ledger import LedgerError
from microingest.commit.staging import BatchAttempt, StagedCounts, stage_part
from microingest.commit.transaction import CommitResult, commit_batch
from microingest.declare.declarations import Pipeline
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import csv_bytes, stage_batch
from microingest.plan.offsets import OffsetRange, RunPlan
from microingest.systems.postgres import connection

log = logging.getLogger(__name__)


class DeadLetterLimitError(LedgerError):
    """Too many bad records in one batch: probably a broken producer. Nothing was committed."""


def kafka_read_options(ranges: Sequence[OffsetRange]) -> dict[str, str]:
    """Spark Kafka source options selecting exactly these [from, until) ranges."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
        starting.setdefault(r.topic, {})[str(r.partition)] = r.from_offset
        ending.setdefault(r.topic, {})[str(r.partition)] = r.until_offset
    return {
        "assign": json.dumps(assign),
        "startingOffsets": json.dumps(starting),
        "endingOffsets": json.dumps(ending),
        # A missing offset inside a planned range means data loss: fail rather than skip silently.
        "failOnDataLoss": "true",
        "kafka.isolation.level": "read_committed",
        # A range usually ends at the log's end, where the consumer's last fetch finds nothing and the broker holds
        # it for fetch.max.wait.ms (500 ms by default) in every task. Fetches that find data return at once anyway.
        "kafka.fetch.max.wait.ms": "20",
        "includeHeaders": "true",
    }


class Stager:
    """Runs on executors, once per Spark partition: process each record and stage the results in one transaction."""

    def __init__(self, params: dict[str, Any], pipeline: Pipeline, batch_id: str):
        self.params, self.pipeline, self.batch_id = params, pipeline, batch_id

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        batches = (b for b in batches if b.num_rows)
        head = next(batches, None)
        first = None if head is None else tuple(head.column(i)[0].as_py() for i in range(3))

        def decode(rows: BinaryIO, dead: TextIO) -> StagedCounts:
            processor = RecordProcessor(self.pipeline)
            good = bad = 0
            for batch in itertools.chain([head], batches):
                staged = stage_batch(batch, processor, self.batch_id)
                rows.write(csv_bytes(staged.rows))
                dead.writelines(staged.dead_letters)
                good, bad = good + staged.rows.num_rows, bad + len(staged.dead_letters)
            return StagedCounts(good, bad)

        counts = stage_part(self.params, self.pipeline, self.batch_id, first, decode)
        faults.crash_point("executor_after_stage")
        # The parent of a Python worker is its executor's pyspark daemon: one per executor JVM.
        yield pa.RecordBatch.from_pydict({"rows": [counts.rows], "dead": [counts.dead], "stager": [os.getppid()]},
                                         schema=pa.schema([(c, pa.int64()) for c in ("rows", "dead", "stager")]))


STAGED_SCHEMA = "rows long, dead long, stager long"  # what each Spark partition's Stager returns
# Below this many records a Spark task costs more than its work: its Python worker round trip, its Postgres connection
# and its staging transaction. Measured on a warm Spark Connect server: 100 records in 6 tasks 0.7 s, in one 0.45 s.
RECORDS_PER_TASK = 2_000


def staging_tasks(ranges: Sequence[OffsetRange]) -> int:
    """How many Spark tasks stage a batch: one per range (the Kafka source's own split), fewer for a small batch."""
    records = sum(r.size for r in ranges)
    return max(1, min(len(ranges), -(-records // RECORDS_PER_TASK)))


def run_batch(spark, pipeline: Pipeline, ranges: Sequence[OffsetRange], pg_params: dict[str, Any],
              kafka_options: dict[str, str], run: RunInfo, overlap: str = "refuse",
              run_batch_no: int | None = None, time_window_ms: tuple[int, int] | None = None) -> CommitResult:
    """Read, stage and commit one batch: exactly these ranges, in one Postgres transaction."""
    if not ranges:
        raise ValueError("run_batch needs at least one offset range")
    attempt = BatchAttempt(pg_params, pipeline).open()
    faults.crash_point("after_open")
    log.info("batch %s of pipeline %s: reading %s", attempt.batch_id, pipeline.name,
             ", ".join(f"{r.topic}[{r.partition}] [{r.from_offset}, {r.until_offset})" for r in ranges))
    try:
        # Headers as JSON text: as an Arrow list of structs, Spark re-measures the batch's size for every row it adds
        # (quadratic: 2.5 s of JVM time per 100k records in 6 Spark partitions, even with no headers at all).
        frame = spark.read.format("kafka").options(**kafka_options).options(**kafka_read_options(ranges)).load()
        if time_window_ms is not None:
            # Before any decoding: a record outside the window is not part of this backfill at all.
            frame = frame.where(f"timestamp >= timestamp_millis({time_window_ms[0]}) AND "
                                f"timestamp < timestamp_millis({time_window_ms[1]})")
        frame = (frame.selectExpr("topic", "partition", "offset", "unix_micros(timestamp) AS ts_micros", "key", "value",
                                  "CASE WHEN size(headers) > 0 THEN to_json(headers) END AS headers"))
        tasks = staging_tasks(ranges)
        if tasks < len(ranges):
            # Without a shuffle: each task reads whole ranges, a fixed set of them, so a re-run task (or a
            # speculative copy) brings the same records in the same order and stage_part still recognises them.
            frame = frame.coalesce(tasks)
        parts = frame.mapInArrow(Stager(pg_params, pipeline, attempt.batch_id), STAGED_SCHEMA).collect()
        staged = StagedCounts(sum(p[0] for p in parts), sum(p[1] for p in parts))
        staged_at = datetime.now(timezone.utc)
        log.info("batch %s staged: %d rows, %d dead letters, in %d Spark partitions staged by %d executor processes",
                 attempt.batch_id, staged.rows, staged.dead, len(parts), len({p[2] for p in parts}))
        too_many = pipeline.dead_letter.exceeded(staged.dead, staged.records)
        if too_many:
            raise DeadLetterLimitError(
                f"batch {attempt.batch_id} of pipeline '{pipeline.name}' refused: {too_many}. Nothing was committed; "
                f"first reasons: {'; '.join(attempt.sample_dead_letters())}")
        faults.crash_point("after_stage")
        result = commit_batch(attempt, ranges, staged, run, overlap=overlap, staged_at=staged_at,
                              spark_app_id=spark.conf.get("spark.app.id"), run_batch=run_batch_no)
        attempt.release_space()
    except BaseException:
        attempt.discard()
        raise
    finally:
        attempt.close()
    faults.crash_point("after_commit")
    return result


@dataclass
class RunProgress:
    """What a run has committed so far, including batches of earlier tries of the same DAG run."""

    batches: int = 0
    records_read: int = 0
    rows_written: int = 0
    dead_letters: int = 0
    skipped: int = 0
    remaining: int = 0  # records of the run's plan left for the next run (time budget spent)

    def add(self, result: CommitResult) -> None:
        self.batches += 1
        self.records_read += result.records_read
        self.rows_written += result.rows_written
        self.dead_letters += result.dead_letters
        self.skipped += result.skipped

    def to_dict(self) -> dict:
        return asdict(self)


def run_plan(spark, pipeline: Pipeline, plan: RunPlan, pg_params: dict[str, Any], kafka_options: dict[str, str],
             run: RunInfo, progress: RunProgress | None = None, clock=time.monotonic, mirror=None) -> RunProgress:
    """Commit a run's plan batch by batch in this Spark application, until done or the time budget is spent.

    With a DAG run id, batches that earlier tries of the same run committed are skipped: a retry goes on where the
    failed try stopped, and a retry after a commit whose acknowledgement was lost finds the work done. `mirror`
    (a lag.mirror.GroupMirror) is handed the ledger positions each live batch committed."""
    progress = progress if progress is not None else RunProgress()
    run = replace(run, kind=plan.kind)
    if run.run_id:
        with connection(pg_params) as conn:
            before = committed_by_run(conn, pipeline.name, run.dag_id, run.run_id, plan.kind)
        if before.batches:
            plan = plan.without(before.ranges)
            progress.batches, progress.records_read = before.batches, before.records_read
            progress.rows_written, progress.dead_letters = before.rows_written, before.dead_letters
            log.info("run %s committed %d batch(es) in earlier tries (%d records); %d records of its plan remain",
                     run.run_id, before.batches, before.records_read, plan.total_records)
    started = clock()
    total, expected, first = plan.total_records, progress.batches + plan.batches_needed, progress.batches
    done = 0
    while plan.ranges:
        spent = clock() - started
        if plan.time_budget_seconds is not None and progress.batches > first and spent >= plan.time_budget_seconds:
            progress.remaining = plan.total_records
            log.info("time budget of %ss spent after %d batch(es); %d records left for the next run",
                     plan.time_budget_seconds, progress.batches - first, progress.remaining)
            break
        batch, plan = plan.next_batch()
        batch_started = clock()
        result = run_batch(spark, pipeline, batch, pg_params, kafka_options, run, plan.overlap, progress.batches + 1,
                           plan.time_window_ms)
        progress.add(result)
        if mirror is not None and plan.kind == "ingest":
            mirror.publish({r.partition: r.until_offset for r in batch})
        done += sum(r.size for r in batch)
        seconds = max(clock() - batch_started, 1e-6)
        skipped = f", {result.skipped} already there and skipped" if result.skipped else ""
        log.info("batch %d of %d committed (%s): %d records, %d rows written, %d dead letters%s in %.1fs "
                 "(%.0f rows/s); offsets %d of %d done", progress.batches, expected, result.batch_id,
                 result.records_read, result.rows_written, result.dead_letters, skipped, seconds,
                 result.records_read / seconds, done, total)
    return progress
