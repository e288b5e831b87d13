"""The body of the Spark ingest job: read exactly the planned Kafka ranges, decode, stage, publish.

Executors decode and stage their Spark partitions in parallel (`Stager`): good records into the pipeline's staging
table, bad ones (see `records`) into the staged dead letters. The driver checks the dead-letter guard and commits the
whole batch in one Postgres transaction (`ledger.BatchAttempt.publish`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import tempfile
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Sequence

from microingest import faults
from microingest.codec import copy_text_row
from microingest.declarations import Pipeline
from microingest.ledger import BatchAttempt, CommitResult, LedgerError, RunInfo, StagedCounts, stage_part
from microingest.planning import OffsetRange
from microingest.records import BadRecord, RecordProcessor

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_SPILL_BYTES = 64 * 1024 * 1024  # a partition's COPY buffer stays in memory up to this size, then spills to disk


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
        "includeHeaders": "true",
    }


def headers_json(headers) -> list[dict] | None:
    """Kafka headers as JSON: values as UTF-8 text where they are, else base64."""
    if not headers:
        return None
    out = []
    for key, value in headers:
        entry: dict[str, Any] = {"key": key}
        if value is not None:
            try:
                entry["value"] = bytes(value).decode("utf-8")
            except UnicodeDecodeError:
                entry["value_base64"] = base64.b64encode(bytes(value)).decode()
        out.append(entry)
    return out


class Stager:
    """Runs on executors, once per Spark partition: process each record and stage the results in one transaction."""

    def __init__(self, params: dict[str, Any], pipeline: Pipeline, batch_id: str):
        self.params, self.pipeline, self.batch_id = params, pipeline, batch_id

    def __call__(self, records: Iterator[Any]) -> Iterator[tuple[int, int, int]]:
        processor = RecordProcessor(self.pipeline)
        with tempfile.SpooledTemporaryFile(_SPILL_BYTES, mode="w+") as rows, \
                tempfile.SpooledTemporaryFile(_SPILL_BYTES, mode="w+") as dead:
            good = bad = 0
            for topic, partition, offset, ts_micros, key, value, headers in records:
                ts = None if ts_micros is None else _EPOCH + timedelta(microseconds=ts_micros)
                try:
                    staged = processor.process(key, value)
                except BadRecord as exc:
                    dead.write(copy_text_row((self.batch_id, topic, partition, offset, ts, key, value,
                                              headers_json(headers), exc.error_class, str(exc))))
                    bad += 1
                    continue
                rows.write(copy_text_row((topic, partition, offset, ts, self.batch_id) + staged))
                good += 1
            rows.seek(0)
            dead.seek(0)
            counts = stage_part(self.params, self.pipeline, self.batch_id, rows, dead, StagedCounts(good, bad))
        faults.crash_point("executor_after_stage")
        # The parent of a Python worker is its executor's pyspark daemon: one per executor JVM.
        yield counts.rows, counts.dead, os.getppid()


def run_batch(spark, pipeline: Pipeline, ranges: Sequence[OffsetRange], pg_params: dict[str, Any],
              kafka_options: dict[str, str], run: RunInfo) -> CommitResult:
    if not ranges:
        raise ValueError("run_batch needs at least one offset range")
    attempt = BatchAttempt(pg_params, pipeline).open()
    faults.crash_point("after_open")
    log.info("batch %s of pipeline %s: reading %s", attempt.batch_id, pipeline.name,
             ", ".join(f"{r.topic}[{r.partition}] [{r.from_offset}, {r.until_offset})" for r in ranges))
    try:
        frame = (spark.read.format("kafka").options(**kafka_options).options(**kafka_read_options(ranges)).load()
                 .selectExpr("topic", "partition", "offset", "unix_micros(timestamp) AS ts_micros", "key", "value",
                             "headers"))
        parts = frame.rdd.mapPartitions(Stager(pg_params, pipeline, attempt.batch_id)).collect()
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
        result = attempt.publish(ranges, staged, run, staged_at, spark.sparkContext.applicationId)
    except BaseException:
        attempt.discard()
        raise
    finally:
        attempt.close()
    log.info("batch %s committed: %d records read, %d rows written, %d dead letters", result.batch_id,
             result.records_read, result.rows_written, result.dead_letters)
    return result
