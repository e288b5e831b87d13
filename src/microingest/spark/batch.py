"""One batch of a run on Spark: read exactly its offset ranges, decode them (in the JVM where the pipeline allows,
`jvm_decode`, else on the executors by the reference, `decoder.Decoder`), collect what was decoded chunk by chunk
into the batch's spool (`arrow_chunks`, `commit.spool`), check the dead-letter guard (`read_batch`, which writes
nothing); then commit it in one Postgres transaction (`commit_batch`, by `commit.copy_commit`)."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

import pyarrow as pa

from microingest import faults
from microingest.batches import Batch, CommitResult, OffsetRange
from microingest.commit.copy_commit import DecodedBatch, commit_decoded
from microingest.commit.sinks import sink_for
from microingest.commit.target_tables import check_target
from microingest.decode.records import RecordProcessor
from microingest.errors import Refused
from microingest.spark.arrow_chunks import arrow_chunks
from microingest.spark.dead_letter_limit import check_dead_letters
from microingest.spark.decoder import DECODED_SCHEMA, Decoder, collected
from microingest.spark.job import IngestJob
from microingest.spark.jvm_collected import collected as jvm_collected
from microingest.spark.jvm_decode import decoded_frame, distrust, sample_every
from microingest.spark.sql_transform import transformed

log = logging.getLogger(__name__)

# Below this many records a Spark task costs more than its work, its Python worker round trip above all. Measured on a
# warm Spark Connect server when each task also staged into Postgres: 100 records in 6 tasks 0.7 s, in one 0.45 s.
RECORDS_PER_TASK = 2_000


class BatchTooLargeError(Refused):
    """The batch, decoded, is more than the driver may collect (spark.driver.maxResultSize). Nothing was written;
    the run splits it (`run.run_plan`), and only a single record over the limit is refused for good."""


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


def decode_tasks(ranges: Sequence[OffsetRange]) -> int:
    """How many Spark tasks decode a batch: one per range (the Kafka source's own split), fewer for a small batch."""
    records = sum(r.size for r in ranges)
    return max(1, min(len(ranges), -(-records // RECORDS_PER_TASK)))


def read_batch(job: IngestJob, batch: Batch) -> DecodedBatch:
    """Everything of a batch before its commit: the target checked, exactly its ranges read and decoded, the
    dead-letter guard. Writes nothing anywhere, so it may run while the batch before it commits (`read_ahead`)."""
    if not batch.ranges:
        raise ValueError("read_batch needs at least one offset range")
    pipeline, sink = job.pipeline, sink_for(job.pipeline)
    batch_id, started_at = str(uuid.uuid4()), datetime.now(timezone.utc)
    # A skip writes dead letters only, straight into their table, whatever the target (which it leaves alone).
    into_target = batch.is_skip
    if not batch.is_skip:
        with job.systems.db() as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                target = check_target(cur, pipeline)
        # Rows go straight into an append target in binary form, which needs its columns of the declared types;
        # into wider ones they go through the staging table, where Postgres converts them (`copy_binary`). A
        # partitioned target's rows go through it too: their times say which partitions to make first.
        into_target = (
            sink.mode == "append" and not batch.is_backfill and not target.retyped and pipeline.partition_by is None
        )
    faults.crash_point("after_open")
    log.info(
        "batch %s of pipeline %s: %s %s",
        batch_id,
        pipeline.name,
        "skipping" if batch.is_skip else "reading",
        ", ".join(map(str, batch.ranges)),
    )
    decoded = _decoded(job, batch, batch_id, into_target, started_at)
    log.info(
        "batch %s decoded: %d rows, %d dead letters (%s)",
        batch_id,
        decoded.counts.rows,
        decoded.counts.dead,
        decoded.spooled(),
    )
    if not batch.is_skip:  # a skip's dead letters are what the operator asked for
        check_dead_letters(pipeline, batch_id, decoded.counts, decoded.sample_dead_letters)
    faults.crash_point("after_decode")
    return decoded


def commit_batch(job: IngestJob, batch: Batch, decoded: DecodedBatch) -> CommitResult:
    """The batch `read_batch` decoded, committed in one Postgres transaction."""
    try:
        with job.systems.db() as conn:
            conn.autocommit = True
            result = commit_decoded(conn, sink_for(job.pipeline), batch, decoded, job.run)
    finally:
        decoded.close()  # the next batch, read ahead meanwhile, has spools of its own
    faults.crash_point("after_commit")
    return result


def _decoded(job: IngestJob, batch: Batch, batch_id: str, into_target: bool, started_at: datetime) -> DecodedBatch:
    """The batch read and decoded: in the JVM where the pipeline's records may be, else by the reference decoder on
    the executors (`decoder.Decoder`)."""
    pipeline = job.pipeline
    frame = read_frame(job.spark, job.systems.spark_kafka, batch, reader_group(pipeline.name))
    jvm = job.jvm if job.jvm is not None and job.jvm.usable and not batch.is_skip else None
    every = sample_every(batch.offsets)
    if pipeline.rows_in_spark and not batch.is_skip:
        registry, key = job.systems.registry, job.systems.mask_key
        return transformed(
            job.spark,
            pipeline,
            registry,
            frame,
            batch_id,
            into_target,
            started_at,
            key,
            batch.is_backfill,
            jvm,
            every,
        )
    if jvm is not None:
        processor = RecordProcessor(pipeline, job.systems.registry)
        try:
            return jvm_collected(
                _collect(decoded_frame(frame, jvm, every), batch), processor, batch_id, into_target, started_at
            )
        except Exception as exc:  # the JVM's refusals: what `distrust` does not recognise is raised again
            distrust(jvm, pipeline, exc)
    decoder = Decoder(pipeline, batch_id, job.systems.registry, into_target, batch.note if batch.is_skip else None)
    return collected(_collect(frame.mapInArrow(decoder, DECODED_SCHEMA), batch), decoder, started_at)


def _collect(frame, batch: Batch) -> Iterator[pa.Table]:
    """The frame's rows on the driver in Arrow chunks as they arrive (`arrow_chunks`)."""
    try:
        yield from arrow_chunks(frame)
    except Exception as exc:  # classic and Spark Connect raise different classes; the message is Spark's own
        if "spark.driver.maxResultSize" not in str(exc):
            raise
        first = next((line for line in str(exc).splitlines() if "maxResultSize" in line), "")
        raise BatchTooLargeError(
            f"a batch of {batch.offsets} offsets ({', '.join(map(str, batch.ranges))}) is more "
            f"than the driver may collect decoded: {first.strip()}"
        ) from None


def reader_group(pipeline: str) -> str:
    """The consumer group of the executors' Kafka consumers for a pipeline's batches. One per pipeline, not Spark's
    default of one per query, so an executor's pooled consumer (and its connection) serves the next batch too. They
    only read assigned ranges and commit nothing; the group Kafka's tools show is `lag.mirror`'s."""
    return f"microingest-{pipeline}-reader"


def reader_options(kafka_options: dict[str, str], batch: Batch, group: str | None) -> dict[str, str]:
    """The Kafka source's options for the batch: the connection's (`spark_kafka_options`), the batch's ranges, and
    consumer group `group` unless the connection names its own."""
    options = {**kafka_options, **kafka_read_options(batch.ranges)}
    if group is not None:
        options.setdefault("kafka.group.id", group)
    return options


def read_frame(spark, kafka_options: dict[str, str], batch: Batch, group: str | None = None):
    """The batch's records as the Decoder takes them, split into at most decode_tasks() Spark partitions; read in
    consumer group `group` unless the Kafka connection names one (for group-based authorization, say)."""
    frame = spark.read.format("kafka").options(**reader_options(kafka_options, batch, group)).load()
    if batch.time_window_ms is not None:
        # Before any decoding: a record outside the window is not part of this backfill at all.
        frame = frame.where(
            f"timestamp >= timestamp_millis({batch.time_window_ms[0]}) AND "
            f"timestamp < timestamp_millis({batch.time_window_ms[1]})"
        )
    # Headers as JSON text: as an Arrow list of structs, Spark re-measures the batch's size for every row it adds
    # (quadratic: 2.5 s of JVM time per 100k records in 6 Spark partitions, even with no headers at all).
    frame = frame.selectExpr(
        "topic",
        "partition",
        "offset",
        "unix_micros(timestamp) AS ts_micros",
        "key",
        "value",
        "CASE WHEN size(headers) > 0 THEN to_json(headers) END AS headers",
    )
    tasks = decode_tasks(batch.ranges)
    if tasks < len(batch.ranges):
        # Without a shuffle: each task reads whole ranges, in order, and hands on what it decoded.
        frame = frame.coalesce(tasks)
    return frame
