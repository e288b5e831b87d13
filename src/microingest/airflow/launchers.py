"""How the ingest task starts its Spark job: one launcher per launch mode, picked once from the pipeline's Spark
connection (as the Spark provider's operator keeps one backend per deployment mode).

- spark-submit (a `spark` connection, or none: `local[*]`): a Spark application per run, through the provider's
  `SparkSubmitHook`;
- Spark Connect (a `spark_connect` connection): the job as a Python client of that long-lived server, started
  without spark-submit.

Each runs the job to its end (raising when it fails) and kills it when the task is killed. Credentials reach the job
only through its process environment: on YARN and Kubernetes the provider turns `env_vars` into
`--conf ...Env.<NAME>=<value>` arguments, i.e. secrets on a command line anyone on the host can read, so those
masters are refused until secrets reach the job another way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Protocol

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from microingest import settings
from microingest.airflow.job_process import JobProcess
from microingest.batches import RunInfo, RunPlan
from microingest.declare.pipeline import Pipeline
from microingest.spark import connect as spark_connect
from microingest.spark import submit as spark_submit
from microingest.systems.connections import ConnectionInfo, env_name, get_connection, to_env_value

LOCAL_MASTER = "local[*]"


class Launcher(Protocol):
    def run(self) -> None:
        """Start the job and wait for its end; raise when it did not end well."""

    def kill(self) -> None:
        """Stop the job (the task was killed)."""


@dataclass
class SubmitLauncher:
    """spark-submit, through the Spark provider's hook."""

    hook: SparkSubmitHook
    application: str

    def run(self) -> None:
        self.hook.submit(self.application)  # raises when spark-submit exits with an error

    def kill(self) -> None:
        self.hook.on_kill()


@dataclass
class ConnectLauncher:
    """The job as a client process of a Spark Connect server."""

    process: JobProcess
    conn_id: str

    def run(self) -> None:
        code = self.process.run()
        if code:
            raise RuntimeError(f"the ingest job (a client of Spark Connect connection '{self.conn_id}') exited {code}")

    def kill(self) -> None:
        self.process.stop()


def launcher_for(pipeline: Pipeline, plan: RunPlan, run: RunInfo, env: dict[str, str], log: Any) -> Launcher:
    """The launcher of the pipeline's Spark connection, with the job's arguments and environment (`env`: the
    pipeline's connections and the outcome file) set; `log` gets the job's output."""
    spark = _spark_connection_or_local(pipeline.spark_conn_id)
    if spark_connect.is_spark_connect(spark):
        spark_connect.remote_url(spark)  # a malformed connection fails here, with its reason
        process = JobProcess(
            spark_connect.job_command(pipeline, plan, run),
            {**os.environ, **env, env_name(spark.conn_id): to_env_value(spark)},
            log,
            forkable=True,
        )
        return ConnectLauncher(process, spark.conn_id)
    master = f"{spark.host}:{spark.port}" if spark.port else spark.host
    if "yarn" in master or "k8s" in master:  # the provider's own test of the master (SparkSubmitHook.__init__)
        raise AirflowFailException(
            f"Spark connection '{spark.conn_id}' uses master '{master}': on YARN and Kubernetes the Spark "
            "provider puts environment variables (this job's Kafka and Postgres credentials) on the spark-submit "
            "command line, so microingest refuses these masters; use local[*] or a spark:// standalone master"
        )
    hook = SparkSubmitHook(
        conf=spark_submit.job_conf(master),
        conn_id=spark.conn_id,
        jars=",".join(spark_submit.job_jars()),
        name=f"microingest-{pipeline.name}",
        application_args=spark_submit.job_args(pipeline.name, plan, run),
        env_vars=env,
    )
    return SubmitLauncher(hook, str(settings.spark_job_path()))


def _spark_connection_or_local(conn_id: str) -> ConnectionInfo:
    """`local[*]` when the Spark connection is not defined; a connection that is defined but unreadable fails the
    task with the reason (running locally instead would hide a broken cluster setting)."""
    try:
        return get_connection(conn_id)
    except AirflowNotFoundException:
        # Environment connections are what Airflow consults first; this one only lives in this task's process.
        os.environ[env_name(conn_id)] = json.dumps({"conn_type": "spark", "host": LOCAL_MASTER})
        return get_connection(conn_id)
