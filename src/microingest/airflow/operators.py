"""Operators of the pipeline DAGs."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cached_property
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException

from microingest import settings
from microingest.airflow.job_process import JobProcess
from microingest.commit.history import RunInfo, committed_by_run
from microingest.declare.pipeline import Pipeline
from microingest.errors import Transient
from microingest.plan.offsets import RunPlan
from microingest.spark import connect as spark_connect
from microingest.spark import submit as spark_submit
from microingest.systems.connections import ConnectionInfo, env_name, get_connection, to_env_value
from microingest.systems.pipeline_systems import PipelineSystems

LOCAL_MASTER = "local[*]"


class SparkIngestOperator(SparkSubmitOperator):
    """Submit the ingest Spark job for the run planned by an upstream task (XCom of `plan_task_id`).

    The job commits the plan batch by batch; a retry goes on where the failed try stopped (the batch history knows
    what this run committed), and returns the committed outcome without Spark when nothing is left.

    The Spark master comes from the pipeline's Spark connection, `local[*]` when that connection is not defined (the
    provider on its own would fall back to YARN). A connection of type `spark_connect` runs the job on that long-lived
    Spark Connect server instead (microingest.spark.connect): the job is then a Python client, started here without
    spark-submit. Kafka and Postgres connections are resolved here and handed to the job as environment variables
    after templates are rendered, so credentials appear neither in rendered templates nor on the command line.
    """

    ui_color = "#f4a460"

    def __init__(self, *, pipeline: Pipeline, plan_task_id: str = "plan", **kwargs: Any) -> None:
        kwargs.setdefault("name", f"microingest-{pipeline.name}")
        kwargs.setdefault("conf", dict(spark_submit.JOB_CONF))
        super().__init__(application=str(settings.spark_job_path()), conn_id=pipeline.spark_conn_id, **kwargs)
        self.pipeline = pipeline
        self.plan_task_id = plan_task_id
        self._client: JobProcess | None = None  # the job as a Spark Connect client
        self._kind = "live"  # the planned run's, for lineage

    @cached_property
    def systems(self) -> PipelineSystems:
        """The pipeline's Kafka and Postgres, resolved once per task try (as a provider hook resolves its client)."""
        return PipelineSystems.of(self.pipeline)

    def execute(self, context: Any) -> dict:  # type: ignore[override]  # the job's outcome, pushed as XCom
        ti = context["ti"]
        planned = ti.xcom_pull(task_ids=self.plan_task_id)
        if not planned or not planned.get("ranges"):
            raise ValueError(f"task '{self.plan_task_id}' planned no ranges; nothing to ingest")
        plan = RunPlan.from_dict(planned)
        self._kind = "live" if plan.kind == "ingest" else plan.kind
        run = RunInfo(ti.dag_id, ti.run_id, ti.try_number, getattr(context.get("dag_run"), "clear_number", 0) or 0)
        done = self._committed_earlier(plan, run)
        if done is not None:
            return done
        fd, outcome_file = tempfile.mkstemp(prefix="microingest-outcome-", suffix=".json")
        os.close(fd)
        try:
            self.prepare_submit(plan, run, outcome_file)
            try:
                self._run_job(context)
            except Exception:
                outcome = _read_outcome(outcome_file)
                if outcome.get("status") != "failed":
                    raise  # Spark, Kafka or Postgres trouble: a retry goes on where this try stopped
                message = f"{outcome['error_class']}: {outcome['error']}"
                if outcome.get("batches"):
                    message += (
                        f" ({outcome['batches']} batch(es) of this run committed before, "
                        f"{outcome['records_read']} records)"
                    )
                if not outcome.get("retryable", True):
                    raise AirflowFailException(message) from None  # a retry would be refused the same way
                raise BatchFailedError(message) from None
            outcome = _read_outcome(outcome_file)
        finally:
            os.unlink(outcome_file)
        self.log.info(
            "run committed %s batch(es): %s records read, %s rows written, %s dead letters",
            outcome.get("batches"),
            outcome.get("records_read"),
            outcome.get("rows_written"),
            outcome.get("dead_letters"),
        )
        if outcome.get("remaining"):
            self.log.info(
                "time budget (max_run_seconds %s) spent: %s records of this run's plan are left to the next run",
                plan.time_budget_seconds,
                outcome["remaining"],
            )
        return outcome

    def prepare_submit(self, plan: RunPlan, run: RunInfo, outcome_file: str) -> SparkSubmitHook | JobProcess:
        """Set the job's arguments and environment and build what starts it: the provider's spark-submit hook, or for
        a Spark Connect connection the job as a client process.

        Credentials reach the job only through its process environment. On YARN and Kubernetes the provider turns
        `env_vars` into `--conf ...Env.<NAME>=<value>` arguments, i.e. secrets on a command line anyone on the host
        can read, so those masters are refused until secrets reach the job another way."""
        self.application_args = spark_submit.job_args(self.pipeline.name, plan, run)
        self.env_vars = {**(self.env_vars or {}), **self.systems.as_env(), "MICROINGEST_OUTCOME_FILE": outcome_file}
        spark = _spark_connection_or_local(self._conn_id)
        if spark_connect.is_spark_connect(spark):
            spark_connect.remote_url(spark)  # a malformed connection fails here, with its reason
            self._client = JobProcess(
                spark_connect.job_command(self.pipeline, plan, run),
                {**os.environ, **self.env_vars, env_name(spark.conn_id): to_env_value(spark)},
                self.log,
            )
            return self._client
        self.jars = ",".join(settings.spark_jars())
        master = f"{spark.host}:{spark.port}" if spark.port else spark.host
        if "yarn" in master or "k8s" in master:  # the provider's own test of the master (SparkSubmitHook.__init__)
            raise AirflowFailException(
                f"Spark connection '{self._conn_id}' uses master '{master}': on YARN and Kubernetes the Spark "
                "provider puts environment variables (this job's Kafka and Postgres credentials) on the spark-submit "
                "command line, so microingest refuses these masters; use local[*] or a spark:// standalone master"
            )
        self._hook = None  # the hook captures its arguments when built; build it from the values set above
        return self._get_hook()

    def _run_job(self, context: Any) -> None:
        if self._client is None:
            super().execute(context)
            return
        code = self._client.run()
        if code:
            raise RuntimeError(f"the ingest job (a client of Spark Connect connection '{self._conn_id}') exited {code}")

    # OpenLineage (Airflow's provider calls these): the topic in, the target and dead-letter tables out, and after
    # the run what it committed. A failed run is reported failed by the provider, with what it committed before.
    def get_openlineage_facets_on_start(self):
        from microingest.airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline, self.systems, self._kind)

    def get_openlineage_facets_on_complete(self, task_instance):
        from microingest.airflow.lineage import operator_lineage

        return operator_lineage(self.pipeline, self.systems, self._kind, task_instance)

    def get_openlineage_facets_on_failure(self, task_instance):
        return self.get_openlineage_facets_on_complete(task_instance)

    def on_kill(self) -> None:
        if self._client is not None:
            self._client.stop()
        else:
            super().on_kill()

    def _committed_earlier(self, plan: RunPlan, run: RunInfo) -> dict | None:
        """On a retry: the outcome, when earlier tries of this run committed its whole plan (e.g. the job died after
        its last commit, or the commit's acknowledgement was lost), so no Spark job is started for nothing."""
        if run.task_try is None or run.task_try <= 1:
            return None
        with self.systems.db() as conn:
            before = committed_by_run(conn, self.pipeline.name, run, plan.kind)
        if not before.batches or plan.without(before.ranges).ranges:
            return None
        self.log.info(
            "earlier tries of run %s committed its whole plan (%d batch(es), %d records); nothing left to do",
            run.run_id,
            before.batches,
            before.records_read,
        )
        return before.to_dict()


def _spark_connection_or_local(conn_id: str) -> ConnectionInfo:
    """`local[*]` when the Spark connection is not defined; a connection that is defined but unreadable fails the
    task with the reason (running locally instead would hide a broken cluster setting)."""
    try:
        return get_connection(conn_id)
    except AirflowNotFoundException:
        # Environment connections are what Airflow consults first; this one only lives in this task's process.
        os.environ[env_name(conn_id)] = json.dumps({"conn_type": "spark", "host": LOCAL_MASTER})
        return get_connection(conn_id)


class BatchFailedError(Transient):
    """The Spark job ran and did not commit a batch for a reason a retry may not meet (a connection lost, a commit
    that waited too long); nothing of the batch was written."""


def _read_outcome(path: str) -> dict:
    try:
        with open(path) as f:
            return json.loads(f.read() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
