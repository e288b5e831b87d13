"""Operators of the pipeline DAGs."""

from __future__ import annotations

import json
import os
import tempfile
from functools import cached_property
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from microingest import settings
from microingest.airflow import PLAN_SUMMARY_KEY
from microingest.airflow.launchers import Launcher, launcher_for
from microingest.batches import RunInfo, RunOutcome, RunPlan
from microingest.commit.history import committed_by_run
from microingest.declare.pipeline import Pipeline
from microingest.errors import Transient
from microingest.systems.pipeline_systems import PipelineSystems


class SparkIngestOperator(BaseOperator):
    """Plan the DAG run, then run the ingest Spark job on the plan (no job when there is nothing to do: the task is
    skipped).

    The plan comes from the run's Params, the ledger and Kafka (microingest.airflow.run_planning); its summary is the
    task's XCom `plan_summary`. The job commits the plan batch by batch; a retry goes on with the same plan where the
    failed try stopped (the batch history knows what this run committed), and returns the committed outcome without
    Spark when nothing is left.

    How the job starts is the pipeline's Spark connection's (microingest.airflow.launchers): spark-submit through the
    Spark provider's hook on its master (`local[*]` when that connection is not defined: the provider on its own
    would fall back to YARN), or for a connection of type `spark_connect` a client of that long-lived Spark Connect
    server (microingest.spark.connect). Kafka and Postgres connections are resolved here and handed to the job as
    environment variables, so credentials appear neither in rendered templates nor on the command line.
    """

    ui_color = "#f4a460"

    def __init__(self, *, pipeline: Pipeline, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self._launcher: Launcher | None = None
        self._kind = "live"  # the planned run's, for lineage

    @cached_property
    def systems(self) -> PipelineSystems:
        """The pipeline's Kafka and Postgres, resolved once per task try (as a provider hook resolves its client)."""
        return PipelineSystems.of(self.pipeline)

    def execute(self, context: Any) -> dict:  # the job's outcome, pushed as XCom
        # When the task runs: parsing the DAG file imports neither planning nor the commit.
        from microingest.airflow.run_planning import planned_run

        ti = context["ti"]
        run = RunInfo(ti.dag_id, ti.run_id, ti.try_number, getattr(context.get("dag_run"), "clear_number", 0) or 0)
        planned = planned_run(self.pipeline, context, run)
        if planned.summary is not None:
            ti.xcom_push(key=PLAN_SUMMARY_KEY, value=planned.summary)
        if planned.plan is None:
            raise AirflowSkipException("no Spark job: nothing to do, or a dry run (the plan above says which)")
        plan = RunPlan.from_dict(planned.plan)
        self._kind = "live" if plan.kind == "ingest" else plan.kind
        done = self._committed_earlier(plan, run)
        if done is not None:
            return done
        fd, outcome_file = tempfile.mkstemp(prefix="microingest-outcome-", suffix=".json")
        os.close(fd)
        try:
            self._launcher = self.launcher(plan, run, outcome_file)
            try:
                self._launcher.run()
            except Exception:
                reported = _reported(outcome_file)
                if reported is None or reported.failure is None:
                    raise  # Spark, Kafka or Postgres trouble: a retry goes on where this try stopped
                raise _failed(reported) from None
            outcome = _reported(outcome_file)
        finally:
            os.unlink(outcome_file)
        if outcome is None:
            raise BatchFailedError(
                "the Spark job ended without reporting its outcome; a retry goes on from the history"
            )
        if outcome.failure is not None:  # the report decides, whatever the exit code said
            raise _failed(outcome)
        self.log.info(
            "run committed %s batch(es): %s records read, %s rows written, %s dead letters",
            outcome.batches,
            outcome.records_read,
            outcome.rows_written,
            outcome.dead_letters,
        )
        if outcome.remaining:
            self.log.info(
                "time budget (max_run_seconds %s) spent: %s records of this run's plan are left to the next run",
                plan.time_budget_seconds,
                outcome.remaining,
            )
        return outcome.to_dict()

    def launcher(self, plan: RunPlan, run: RunInfo, outcome_file: str) -> Launcher:
        """The job's launcher, its arguments and environment set (the pipeline's connections, the outcome file, and
        the pipelines folder as this task resolved it: the job reads the same declaration, Airflow or not)."""
        env = {
            **self.systems.as_env(),
            "MICROINGEST_OUTCOME_FILE": outcome_file,
            settings.PIPELINES_ENV: str(settings.pipelines_dir()),
        }
        return launcher_for(self.pipeline, plan, run, env, self.log)

    # OpenLineage (Airflow's provider calls these): the topic in, the target and dead-letter tables out, and after
    # the run what it committed. A failed run is reported failed by the provider, with what it committed before.
    def get_openlineage_facets_on_start(self):
        from microingest.airflow.lineage import operator_lineage  # the OpenLineage provider's, only when it asks

        return operator_lineage(self.pipeline, self.systems, self._kind)

    def get_openlineage_facets_on_complete(self, task_instance):
        from microingest.airflow.lineage import operator_lineage  # the OpenLineage provider's, only when it asks

        return operator_lineage(self.pipeline, self.systems, self._kind, task_instance)

    def get_openlineage_facets_on_failure(self, task_instance):
        return self.get_openlineage_facets_on_complete(task_instance)

    def on_kill(self) -> None:
        if self._launcher is not None:
            self._launcher.kill()

    def _committed_earlier(self, plan: RunPlan, run: RunInfo) -> dict | None:
        """On a retry: the outcome, when earlier tries of this run committed its whole plan (e.g. the job died after
        its last commit, or the commit's acknowledgement was lost), so no Spark job is started for nothing."""
        # A redrive's job finds what is left itself, without Spark (its pages start wherever dead letters remain)
        if run.task_try is None or run.task_try <= 1 or plan.kind == "redrive":
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


class BatchFailedError(Transient):
    """The Spark job ran and did not commit a batch for a reason a retry may not meet (a connection lost, a commit
    that waited too long); nothing of the batch was written."""


def _reported(path: str) -> RunOutcome | None:
    """The outcome the job wrote, or None when it wrote none (it died first) or not all of it."""
    try:
        with open(path) as f:
            return RunOutcome.from_dict(json.loads(f.read()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _failed(outcome: RunOutcome) -> Exception:
    """The task's error for a job that stopped on purpose: failed for good if a retry would be refused the same way."""
    failure = outcome.failure
    assert failure is not None
    message = f"{failure.error_class}: {failure.error}"
    if outcome.batches:
        message += f" ({outcome.batches} batch(es) of this run committed before, {outcome.records_read} records)"
    return BatchFailedError(message) if failure.retryable else AirflowFailException(message)
