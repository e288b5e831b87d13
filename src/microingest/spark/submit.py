"""The contract between the Airflow side and the Spark job: arguments, Spark conf and the child environment.

Offset ranges travel as arguments (they are not secret); connections travel as AIRFLOW_CONN_* variables in the
spark-submit process environment, never on its command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from microingest import settings
from microingest.batches import RunInfo, RunPlan
from microingest.declare.pipeline import Pipeline
from microingest.spark import class_archive, job_bundle

JOB_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # Executors on this machine run this Python, which has microingest; a cluster's get the job's bundle (`job_conf`).
    "spark.pyspark.python": sys.executable,
    "spark.python.daemon.module": "microingest.spark.worker_daemon",  # see there: saves about 0.3 s per task
    "spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=file:" + str(settings.spark_log_config()),
    # Executors of their own (a standalone cluster's) log a failed task's value too: the same redaction there.
    "spark.executor.extraJavaOptions": "-Dlog4j2.configurationFile=file:" + str(settings.spark_log_config()),
    # The driver collects each batch decoded (spark.batch): past this, the batch is split in smaller ones instead of
    # held in memory whole (records of 10 KB in a batch of 100,000 would be a gigabyte).
    "spark.driver.maxResultSize": "256m",
    # A frame a batch persists (`sql_transform`, `jvm_typed`) is cached under a clone of the session unless both are
    # set so (Spark's CacheManager), and on Spark Connect a clone copies every artifact of the session into a folder
    # of its own, the job's Python bundle among them: 86 MB a persist, kept while the server runs. The platform has
    # no bucketed tables, and a cached plan's partitioning matters to none of its queries.
    "spark.sql.sources.bucketing.autoBucketedScan.enabled": "false",
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}


def job_conf(master: str = "local[2]") -> dict[str, str]:
    """JOB_CONF for a job on `master`, the driver's and executors' JVMs mapping the class archive `make install` built
    (`class_archive`). On a cluster the executors are not this machine: they get the job's Python as an archive
    (`job_bundle`) and log with the cluster's own log4j configuration (this one's path is not theirs)."""
    conf = dict(JOB_CONF)
    if not is_local(master):
        bundle = job_bundle.job_bundle()
        conf.update(
            {
                "spark.archives": bundle.archive(),
                "spark.pyspark.python": f"./{bundle.python}",
                "spark.pyspark.driver.python": sys.executable,
                "spark.executor.extraJavaOptions": "",
            }
        )
    archive = class_archive.java_options()
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        conf[key] = " ".join(filter(None, (conf[key], archive)))
    return {key: value for key, value in conf.items() if value}


def is_local(master: str) -> bool:
    """Whether the master runs the executors in the driver's JVM, on this machine."""
    return master.startswith("local")


# The connection `make up` and docker compose define for pipelines that want a Spark application of their own per run
# (spark-submit, a JVM and Spark start each: 6-8 s on the development machine): they name it as their spark_conn_id.
SUBMIT_CONN_ID = "microingest_spark_submit"


@dataclass(frozen=True)
class JobArgs:
    """What the job is asked to do: the one form a run plan takes between the ingest task's planning and the job."""

    pipeline: str
    plan: RunPlan
    run: RunInfo
    spark_connect: str | None = None  # a Spark Connect connection id: the job runs as that server's client


def job_args(pipeline: str, plan: RunPlan, run: RunInfo) -> list[str]:
    """The job's arguments; `parse_job_args` reads them back."""
    return ["--pipeline", pipeline, "--plan", json.dumps(plan.to_dict()), "--run", json.dumps(run.to_dict())]


def parse_job_args(argv: list[str]) -> JobArgs:
    parser = argparse.ArgumentParser(
        prog="ingest_job.py",
        description="Ingest a run's planned offset ranges of one pipeline into Postgres, batch by batch, exactly once.",
    )
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--plan", required=True, type=json.loads, help="the run plan (RunPlan.to_dict) as JSON")
    parser.add_argument("--run", default="{}", type=json.loads, help="JSON {dag_id, run_id, task_try}: who asked")
    parser.add_argument(
        "--spark-connect",
        metavar="CONN_ID",
        help="run on the Spark Connect server of this connection instead of a Spark application of its own",
    )
    args = parser.parse_args(argv)
    return JobArgs(args.pipeline, RunPlan.from_dict(args.plan), RunInfo.from_dict(args.run), args.spark_connect)


def command(
    pipeline: Pipeline, plan: RunPlan, run: RunInfo, master: str = "local[2]", extra_conf: dict[str, str] | None = None
) -> list[str]:
    """A spark-submit command line for running the job outside Airflow (tests, debugging)."""
    return submit_argv(
        settings.spark_job_path(),
        job_args(pipeline.name, plan, run),
        f"microingest-{pipeline.name}",
        master,
        extra_conf,
    )


def submit_argv(
    script: Path,
    args: list[str],
    name: str,
    master: str = "local[2]",
    extra_conf: dict[str, str] | None = None,
    jars: list[str] | None = None,
) -> list[str]:
    """spark-submit of a Python script with the job's Spark conf and the Kafka source's jars (plus `jars`)."""
    conf = {**job_conf(master), **(extra_conf or {})}
    argv = [
        "spark-submit",
        "--master",
        master,
        "--name",
        name,
        "--jars",
        ",".join(job_jars() + (jars or [])),
    ]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + [str(script), *args]


def job_jars() -> list[str]:
    """What a job's spark-submit puts on `--jars`: the Kafka source's jars and the JVM decoder's, when it is built."""
    jar = settings.decoder_jar()
    return settings.spark_jars() + ([] if jar is None else [str(jar)])
