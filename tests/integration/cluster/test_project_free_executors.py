"""The cluster topology's Spark workers hold none of microingest (their Python has pyspark's requirements only, as a
team's cluster would): a job's executors import microingest from the bundle the job ships (spark.job_bundle), under
spark-submit and on the Spark Connect server alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from local_platform import config, spark_cluster, spark_connect
from microingest.spark import job_bundle
from microingest.spark.connect import job_session
from microingest.spark.submit import submit_argv

pytestmark = pytest.mark.skipif(
    os.environ.get("MICROINGEST_TOPOLOGY") != "cluster",
    reason="runs against `make up TOPOLOGY=cluster` (the cluster stage of `make test`)",
)

# What each Python worker reports: where it found microingest and which interpreter runs it.
PROBE = """
def where(batches):
    import sys

    import pyarrow as pa

    import microingest.spark.decoder

    for _ in batches:
        yield pa.RecordBatch.from_pylist(
            [{"module": microingest.spark.decoder.__file__, "python": sys.executable, "path": ":".join(sys.path)}]
        )
"""
SCHEMA = "module string, python string, path string"


def _probe():
    scope: dict = {}
    exec(compile(PROBE, "probe", "exec"), scope)  # a function of no module: pickled by value, not by import
    return scope["where"]


def _check(rows: list[dict]) -> None:
    assert rows
    bundle = job_bundle.job_bundle().name
    for row in rows:
        assert f"/{bundle}/site/microingest/" in row["module"], row
        assert Path(row["python"]).resolve() == (config.WORKER_PYTHON / "bin" / "python3.11").resolve(), row
        # Spark's own archives (pyspark.zip, py4j) come from its installation, this venv's pyspark; nothing else.
        ours = [p for p in row["path"].split(":") if p.startswith(sys.prefix) and not p.endswith((".zip", ".jar"))]
        assert not ours, row


def test_the_workers_python_has_no_microingest():
    done = subprocess.run(
        [str(config.WORKER_PYTHON / "bin" / "python"), "-c", "import pyarrow, pandas; import microingest"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "No module named 'microingest'" in done.stderr, done.stderr


def test_spark_submit_executors_import_microingest_from_the_shipped_bundle(tmp_path):
    script = tmp_path / "probe_job.py"
    script.write_text(
        PROBE
        + f"""
import json
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
rows = spark.range(0, 8, numPartitions=4).mapInArrow(where, {SCHEMA!r}).collect()
print("PROBE " + json.dumps([r.asDict() for r in rows]))
spark.stop()
"""
    )
    argv = submit_argv(script, [], "probe", spark_cluster.master_url(), {"spark.cores.max": "2"})
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    [line] = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    _check(json.loads(line.removeprefix("PROBE ")))


def test_spark_connect_executors_import_microingest_from_the_shipped_bundle():
    spark = job_session(spark_connect.local_connection("microingest_spark"), "probe")
    try:
        rows = spark.range(0, 8, numPartitions=4).mapInArrow(_probe(), SCHEMA).collect()
    finally:
        spark.stop()
    _check([r.asDict() for r in rows])
