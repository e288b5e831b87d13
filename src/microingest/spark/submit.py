"""The contract between the Airflow side and the Spark job: arguments, Spark conf and the child environment.

Offset ranges travel as arguments (they are not secret); connections travel as AIRFLOW_CONN_* variables in the
spark-submit process environment, never on its command line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from microingest import settings
from microingest.commit.history import RunInfo
from microingest.declare.declarations import Pipeline
from microingest.plan.offsets import RunPlan
from microingest.systems.connections import env_name, get_connection, to_env_value

JOB_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "false",
    # The executors' Python must be the one that has the microingest package (the project's virtualenv).
    "spark.pyspark.python": sys.executable,
    "spark.python.daemon.module": "microingest.spark.worker_daemon",  # see there: saves about 0.3 s per task
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{settings.spark_job_path().parent / 'log4j2.properties'}",
}


def job_args(pipeline: str, plan: RunPlan, run: RunInfo) -> list[str]:
    return ["--pipeline", pipeline, "--plan", json.dumps(plan.to_dict()), "--run", json.dumps(run.to_dict())]


def connection_env(pipeline: Pipeline) -> dict[str, str]:
    """Resolved Kafka and Postgres connections of the pipeline, as environment for the Spark job."""
    return {env_name(c): to_env_value(get_connection(c)) for c in (pipeline.kafka_conn_id, pipeline.postgres_conn_id)}


def command(pipeline: Pipeline, plan: RunPlan, run: RunInfo, master: str = "local[2]",
            extra_conf: dict[str, str] | None = None) -> list[str]:
    """A spark-submit command line for running the job outside Airflow (tests, debugging)."""
    return submit_argv(settings.spark_job_path(), job_args(pipeline.name, plan, run), f"microingest-{pipeline.name}",
                       master, extra_conf)


def submit_argv(script: Path, args: list[str], name: str, master: str = "local[2]",
                extra_conf: dict[str, str] | None = None, jars: list[str] | None = None) -> list[str]:
    """spark-submit of a Python script with the job's Spark conf and the Kafka source's jars (plus `jars`)."""
    conf = {**JOB_CONF, **(extra_conf or {})}
    argv = ["spark-submit", "--master", master, "--name", name, "--jars", ",".join(settings.spark_jars() + (jars or []))]
    for key, value in conf.items():
        argv += ["--conf", f"{key}={value}"]
    return argv + [str(script), *args]
