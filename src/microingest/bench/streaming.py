"""Contender: what a Spark user picks for the same job. Structured Streaming reads the topic with
`Trigger.AvailableNow` (everything there at start, then stop), decodes with `from_json` in the JVM, and appends each
micro-batch through Spark's JDBC writer in `foreachBatch`. Offsets live in the checkpoint, not in Postgres: a crash
between the JDBC commit and the checkpoint replays the micro-batch (at least once; the target's key would refuse
the replay and fail the query).

Also the source limit: a Spark count of the same Kafka ranges, with no decoding and no sink.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from microingest.bench.dataset import SCHEMA, VALUE_COLUMNS

_SPARK_TYPES = {
    "string": "string",
    "double": "double",
    "integer": "bigint",
    "boolean": "boolean",
    "timestamp": "bigint",
}  # the events carry event_time as epoch milliseconds, or as ISO-8601 text (`iso_timestamps`)


def jdbc_target(pg: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """Spark JDBC URL and properties for psycopg2-style parameters. `reWriteBatchedInserts` is the usual tuning a
    Spark user applies (one multi-row INSERT per batch of 1,000 rows); `stringtype=unspecified` lets text become
    uuid."""
    url = (
        f"jdbc:postgresql://{pg['host']}:{pg['port']}/{pg['dbname']}?reWriteBatchedInserts=true&stringtype=unspecified"
    )
    props = {"driver": "org.postgresql.Driver", "user": pg.get("user", ""), "password": pg.get("password", "")}
    return url, props


def available_now(
    spark,
    kafka_options: dict[str, str],
    topic: str,
    pg: dict[str, Any],
    table: str,
    checkpoint: str,
    max_offsets_per_trigger: int,
    iso_timestamps: bool = False,
) -> None:
    from pyspark.sql import functions as F

    types = {**_SPARK_TYPES, "timestamp": "string"} if iso_timestamps else _SPARK_TYPES
    schema = ", ".join(
        f"{name} {types[spec if isinstance(spec, str) else spec['type']]}" for name, spec in SCHEMA.items()
    )
    event_time = F.to_timestamp if iso_timestamps else F.timestamp_millis
    url, props = jdbc_target(pg)

    def write(frame, _batch_id: int) -> None:
        decoded = frame.select(
            F.col("topic").alias("source_topic"),
            F.col("partition").alias("source_partition"),
            F.col("offset").alias("source_offset"),
            F.col("timestamp").alias("kafka_timestamp"),
            F.lit(str(uuid.uuid4())).alias("batch_id"),
            F.from_json(F.col("value").cast("string"), schema).alias("v"),
        )
        columns = [
            event_time(F.col("v.event_time")).alias(c) if c == "event_time" else F.col(f"v.{c}") for c in VALUE_COLUMNS
        ]
        decoded.where(F.col("v.event_id").isNotNull()).select(  # a malformed value: from_json's nulls, dropped
            "source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id", *columns
        ).write.jdbc(url, table, mode="append", properties=props)

    query = (
        spark.readStream.format("kafka")
        .options(**kafka_options)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
        .option("kafka.isolation.level", "read_committed")
        .load()
        .writeStream.trigger(availableNow=True)
        .option("checkpointLocation", checkpoint)
        .foreachBatch(write)
        .start()
    )
    query.awaitTermination()


def count_ranges(spark, kafka_options: dict[str, str], read_options: dict[str, str]) -> tuple[int, float]:
    """(records, seconds) of a batch read and count of the ranges: the Kafka source's own speed. Counted twice,
    timed the second time: a limit is the best case, with the JVM's code compiled."""
    frame = spark.read.format("kafka").options(**kafka_options).options(**read_options).load()
    frame.count()
    started = time.monotonic()
    records = frame.count()
    return records, time.monotonic() - started
