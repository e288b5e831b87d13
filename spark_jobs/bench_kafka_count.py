"""`make bench` source limit: a Spark batch read and count of the given Kafka ranges, nothing decoded or written.

Prints one JSON line: records counted and the seconds the read and count took (without the JVM's start).
"""

from __future__ import annotations

import argparse
import json
import sys

from pyspark.sql import SparkSession

from microingest.batches import OffsetRange
from microingest.bench.streaming import count_ranges
from microingest.spark.batch import kafka_read_options
from microingest.systems.connections import get_connection, spark_kafka_options


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--until", required=True, help="JSON {partition: end offset}; ranges start at 0")
    args = parser.parse_args(argv)
    ranges = [OffsetRange(args.topic, int(p), 0, end, None) for p, end in json.loads(args.until).items()]
    spark = SparkSession.builder.getOrCreate()
    try:
        records, seconds = count_ranges(
            spark, spark_kafka_options(get_connection("microingest_kafka")), kafka_read_options(ranges)
        )
    finally:
        spark.stop()
    print("BENCH " + json.dumps({"records": records, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
