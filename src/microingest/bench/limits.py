"""The limits every contender is measured against, on the same data and machine:

- sink:   Postgres COPY of the dataset's decoded rows, streamed from a local file into a target shaped like every
          contender's (psycopg2 `copy_expert`, one transaction): what Postgres takes when nothing else is done;
- source: a Spark batch read and count of the same Kafka ranges (Spark's Kafka source with nothing downstream).
"""

from __future__ import annotations

import json
import os
import time

from microingest import settings
from microingest.bench.contenders import Context, Run, bench_result, run_logged
from microingest.bench.dataset import VALUE_COLUMNS, Dataset, write_copy_rows
from microingest.bench.targets import table_name
from microingest.spark import submit as spark_submit
from microingest.systems.postgres import connection

COPY_KEY, COUNT_KEY = "copy_limit", "spark_count"
LABELS = {
    COPY_KEY: "limit: Postgres COPY of the decoded rows from a local file",
    COUNT_KEY: "limit: Spark batch read and count of the Kafka ranges",
}


def copy_limit(ctx: Context, dataset: Dataset) -> Run:
    path = ctx.work_dir / "decoded-rows.copy"
    with path.open("w") as out:
        write_copy_rows(dataset, out)
    columns = ", ".join(
        ("source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id") + VALUE_COLUMNS
    )
    try:
        with connection(ctx.pg) as conn, path.open() as rows:
            started = time.time()
            with conn, conn.cursor() as cur:
                cur.copy_expert(f"COPY {table_name(COPY_KEY)} ({columns}) FROM STDIN", rows, size=1 << 20)
            return Run(time.time() - started, dataset.records)
    finally:
        path.unlink()


def spark_count(ctx: Context, dataset: Dataset) -> Run:
    """Timed inside the job (read and count only): a limit on throughput, not on start-up."""
    argv = spark_submit.submit_argv(
        settings.repo_root() / "spark_jobs" / "bench_kafka_count.py",
        ["--topic", dataset.topic, "--until", json.dumps(dataset.ends)],
        f"bench-{ctx.run_id}-{COUNT_KEY}",
        "local[*]",
        {"spark.ui.enabled": "false"},
    )
    result = bench_result(run_logged(argv, dict(os.environ), ctx.work_dir / f"{COUNT_KEY}.log"))
    return Run(result["seconds"], result["records"])
