"""A DAG run's plan, made by its `ingest` task before any Spark starts: the run's Params read, a live run, a backfill,
a skip or a redrive planned (or nothing to do, or a dry run, when no job starts), and the plan's summary for the
UI. A retry of the task goes on with the plan its first try made, kept in Airflow's task state store for the DAG
run's clearing: what a plan task of its own gave, without a second task to schedule."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from microingest.batches import RunInfo, RunPlan
from microingest.commit.history import committed_by_run
from microingest.commit.target_tables import prepare_target
from microingest.declare.pipeline import Pipeline
from microingest.errors import MicroingestError
from microingest.plan.backfill import plan_backfill
from microingest.plan.live import plan_live_run
from microingest.plan.offsets import RequestError
from microingest.plan.redrive import plan_redrive, redrive_summary
from microingest.plan.request import RunRequest, parse_request
from microingest.plan.skip import plan_skip, skip_summary
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Planned:
    """What a run's planning found: the plan for Spark (None: no job starts) and what to show of it."""

    plan: dict | None = None  # RunPlan.to_dict()
    summary: str | None = None

    def to_dict(self) -> dict:
        return {"plan": self.plan, "summary": self.summary}


def planned_run(pipeline: Pipeline, context: dict[str, Any], run: RunInfo) -> Planned:
    """The run's plan: the one an earlier try of this clearing of the DAG run made, or a new one. A new plan with a
    job to run is kept before the job starts, so that every try of the task ingests the same ranges."""
    store, key = context["task_state_store"], f"plan.{run.clear_number}"
    if (kept := store.get(key)) is not None:
        log.info("the plan of an earlier try of this run (clearing %d)", run.clear_number)
        return Planned(kept["plan"], kept["summary"])
    planned = plan_for_run(pipeline, context)
    if planned.plan is not None:
        store.set(key, planned.to_dict())
    return planned


def plan_for_run(pipeline: Pipeline, context: dict[str, Any]) -> Planned:
    ti, dag_run = context["ti"], context["dag_run"]
    run_type = getattr(dag_run.run_type, "value", dag_run.run_type)
    interval = (context.get("data_interval_start"), context.get("data_interval_end"))
    try:
        request = parse_request(context["params"], run_type, interval)
        log.info("%s run %s: %s%s", run_type, ti.run_id, request.describe(), " (dry run)" if request.dry_run else "")
        if request.redrive is not None:
            return _redrive(pipeline, request, ti, dag_run)
        plan = _plan(pipeline, request, ti, dag_run)
    except MicroingestError as exc:
        if exc.retryable:
            raise  # Kafka or Postgres away for now: Airflow retries the task
        raise AirflowFailException(str(exc)) from None  # the same request would fail the same way: no retries
    if plan is None:
        return Planned()
    said = summary(plan) + (" (dry run: nothing written)" if request.dry_run else "")
    log.info(said)
    if request.dry_run:
        log.info("dry run: nothing was written and no Spark job starts")
        return Planned(None, said)
    if not plan.ranges:
        log.info(
            "nothing to %s: no Spark job starts",
            "backfill" if plan.kind == "backfill" else "ingest (no new records)",
        )
        return Planned(None, said)
    return Planned(plan.to_dict(), said)


def _plan(pipeline: Pipeline, request: RunRequest, ti, dag_run) -> RunPlan | None:

    if request.skip is not None:  # the target is no skip's business
        return _skip_plan(pipeline, request, ti, dag_run)
    if not request.dry_run:
        _prepare_target(pipeline, ti)
    if request.is_backfill:
        return plan_backfill(pipeline, request)
    return plan_live_run(
        pipeline, RunInfo(ti.dag_id, ti.run_id, ti.try_number), request.max_records, record_pins=not request.dry_run
    )


def _prepare_target(pipeline: Pipeline, ti) -> None:
    """Create the target, or add a newly declared field's column, before anything is planned into it."""

    with PipelineSystems.of(pipeline).db() as conn, conn, conn.cursor() as cur:
        prepared = prepare_target(cur, pipeline, f"DAG {ti.dag_id} run {ti.run_id}")
    log.info(prepared.summary())


def _skip_plan(pipeline: Pipeline, request: RunRequest, ti, dag_run) -> RunPlan | None:
    """The skip's plan, or None when an earlier try of this run committed it already (not to be done twice).
    `ingest` runs it on Spark like any batch: the records read as every live batch reads them."""

    assert request.skip is not None
    try:
        return plan_skip(pipeline, request.skip, _who(ti, dag_run))
    except RequestError:
        if request.dry_run:
            raise
        with PipelineSystems.of(pipeline).db() as conn:
            earlier = committed_by_run(conn, pipeline.name, RunInfo(ti.dag_id, ti.run_id), "skip")
        if not earlier.batches:
            raise
    log.info("this run's skip was committed by an earlier try (%d records): nothing left to skip", earlier.records_read)
    return None


def _redrive(pipeline: Pipeline, request: RunRequest, ti, dag_run) -> Planned:
    """The redrive's plan, or none: nothing selected, or a dry run (which decodes the selection here and says what
    would land)."""
    assert request.redrive is not None
    if not request.dry_run:
        _prepare_target(pipeline, ti)  # a fixed declaration may declare a new column
    plan, groups = plan_redrive(pipeline, request.redrive, _who(ti, dag_run))
    said = [redrive_summary(plan, groups)]
    if request.dry_run:
        # Here, not above: the decoder's imports (pyarrow, 0.4 s) would otherwise hold up every run's start.
        from microingest.plan.redrive_preview import preview_redrive

        said += preview_redrive(pipeline, plan).lines() + ["dry run: nothing written"]
    for line in said:
        log.info(line)
    return Planned(None if request.dry_run or not plan.ranges else plan.to_dict(), "\n".join(said))


def _who(ti, dag_run) -> str:
    return getattr(dag_run, "triggering_user_name", None) or f"DAG run {ti.run_id}"


def summary(plan: RunPlan) -> str:
    if plan.kind == "skip":
        return skip_summary(plan)
    ranges = ", ".join(map(str, plan.ranges)) or "none"
    return (
        f"plan ({plan.kind}): {plan.total_records:,} records in at most {plan.batches_needed} batch(es) of "
        f"{plan.batch_cap:,}; ranges: {ranges}"
    )
