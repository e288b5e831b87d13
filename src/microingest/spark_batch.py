"""The body of the Spark ingest job: read exactly the planned Kafka ranges, decode, stage, publish.

Executors decode and stage their Spark partitions in parallel (`Stager`); the driver then commits the whole batch in
one Postgres transaction (`ledger.BatchAttempt.publish`).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Sequence

from microingest import faults
from microingest.codec import DecodeError, decode_json
from microingest.declarations import Pipeline
from microingest.ledger import BatchAttempt, CommitResult, RunInfo, stage_rows
from microingest.planning import OffsetRange

log = logging.getLogger(__name__)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class RecordError(RuntimeError):
    pass


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
    }


class Stager:
    """Runs on executors, once per Spark partition: decode each record and stage the rows in one transaction."""

    def __init__(self, params: dict[str, Any], pipeline: Pipeline, batch_id: str):
        self.params, self.pipeline, self.batch_id = params, pipeline, batch_id

    def __call__(self, records: Iterator[Any]) -> Iterator[int]:
        yield stage_rows(self.params, self.pipeline, self.batch_id, self._rows(records))

    def _rows(self, records: Iterator[Any]) -> Iterator[tuple]:
        schema = self.pipeline.schema
        for topic, partition, offset, ts_micros, value in records:
            try:
                values = decode_json(value, schema)
            except DecodeError as exc:
                raise RecordError(f"{topic}[{partition}]@{offset}: {exc}") from None
            ts = None if ts_micros is None else _EPOCH + timedelta(microseconds=ts_micros)
            yield (topic, partition, offset, ts, self.batch_id, *values)


def run_batch(spark, pipeline: Pipeline, ranges: Sequence[OffsetRange], pg_params: dict[str, Any],
              kafka_options: dict[str, str], run: RunInfo) -> CommitResult:
    if not ranges:
        raise ValueError("run_batch needs at least one offset range")
    attempt = BatchAttempt(pg_params, pipeline).open()
    log.info("batch %s of pipeline %s: reading %s", attempt.batch_id, pipeline.name,
             ", ".join(f"{r.topic}[{r.partition}] [{r.from_offset}, {r.until_offset})" for r in ranges))
    try:
        frame = (spark.read.format("kafka").options(**kafka_options).options(**kafka_read_options(ranges)).load()
                 .selectExpr("topic", "partition", "offset", "unix_micros(timestamp) AS ts_micros", "value"))
        staged = frame.rdd.mapPartitions(Stager(pg_params, pipeline, attempt.batch_id)).collect()
        staged_at = datetime.now(timezone.utc)
        faults.crash_point("after_stage")
        result = attempt.publish(ranges, sum(staged), run, staged_at, spark.sparkContext.applicationId)
    except BaseException:
        attempt.discard()
        raise
    finally:
        attempt.close()
    log.info("batch %s committed: %d records read, %d rows written", result.batch_id, result.records_read,
             result.rows_written)
    return result
