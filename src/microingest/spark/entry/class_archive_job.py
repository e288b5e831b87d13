"""Spark application run once by `make install` (microingest.spark.class_archive): the classes an ingest job's JVM
loads, loaded, so the JVM archives them as it exits. It needs no service: the Kafka source is pointed at a closed port
and fails, having loaded its classes; every other step works on rows made here.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.types import BinaryType, IntegerType, LongType, StringType, StructField, StructType, TimestampType

from microingest.batches import OffsetRange
from microingest.spark.batch import kafka_read_options

# The Kafka source's columns, as the job reads them.
RECORD = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)


def lengths(batches):
    for batch in batches:
        sizes = pa.compute.binary_length(batch.column("value"))
        yield pa.RecordBatch.from_pydict({"offset": batch.column("offset"), "size": sizes})


def main() -> int:
    spark = SparkSession.builder.getOrCreate()
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [(b"k%d" % i, b'{"id": %d, "amount": "1.50"}' % i, "t", i % 2, i, at) for i in range(1000)]
    frame = spark.createDataFrame(rows, RECORD).repartition(2)
    frame.mapInArrow(lengths, "offset long, size int").toArrow()
    frame.createOrReplaceTempView("records")
    spark.sql(
        "SELECT partition, count(*) AS n, sum(get_json_object(CAST(value AS STRING), '$.amount') :: decimal(10, 2)) "
        "FROM records GROUP BY partition"
    ).toArrow()
    options = kafka_read_options([OffsetRange("t", 0, 0, 10, None)])
    try:
        spark.read.format("kafka").options(**options).option("kafka.bootstrap.servers", "127.0.0.1:9").option(
            "kafka.default.api.timeout.ms", "1000"
        ).option("kafka.request.timeout.ms", "1000").load().toArrow()
    except Exception:  # nothing listens there: only the classes on the way were wanted
        pass
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
