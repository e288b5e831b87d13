"""`make bench` contender: Structured Streaming, Trigger.AvailableNow, foreachBatch into Postgres over JDBC.

Run by microingest.bench with the bench's Kafka and Postgres connections in AIRFLOW_CONN_* variables; prints one
JSON line with the time the query finished.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from pyspark.sql import SparkSession

from microingest.bench.streaming import available_now
from microingest.systems.connections import get_connection, postgres_params, spark_kafka_options


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-offsets-per-trigger", type=int, required=True)
    parser.add_argument("--iso-timestamps", action="store_true", help="event_time is ISO-8601 text")
    args = parser.parse_args(argv)
    spark = SparkSession.builder.getOrCreate()
    try:
        available_now(
            spark,
            spark_kafka_options(get_connection("microingest_kafka")),
            args.topic,
            postgres_params(get_connection("microingest_postgres")),
            args.table,
            args.checkpoint,
            args.max_offsets_per_trigger,
            args.iso_timestamps,
        )
    finally:
        spark.stop()
    print("BENCH " + json.dumps({"done_at": time.time()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
