"""One DAG per declared pipeline: ingest (the run planned, then a Spark job, one Postgres transaction per batch; no
job when there is nothing to do) -> announce (the target's Asset event and the run's note)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, CronDataIntervalTimetable, get_parsing_context, task
from airflow.sdk.exceptions import AirflowNotFoundException

from microingest.airflow import GATE_TASK_ID
from microingest.airflow.assets import records_asset, target_asset
from microingest.airflow.lag_sensors import LagGateSensor, LagSlaSensor
from microingest.airflow.operators import SparkIngestOperator
from microingest.airflow.params import pipeline_params
from microingest.declare.files import get_pipeline, load_declarations
from microingest.declare.pipeline import DAG_ID_PREFIX, DeclarationError, Pipeline
from microingest.errors import MicroingestError

START_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
_TAG_MAX_LEN = 100  # Airflow's limit on a DAG tag


def build_dag(pipeline: Pipeline) -> DAG:
    asset = target_asset(pipeline)
    doc = (
        f"Ingest Kafka {pipeline.sources_named} into `{pipeline.target_table}` ({pipeline.sink_mode}): each run "
        f"reads up to {pipeline.max_records_per_run:,} records in batches of at most "
        f"{pipeline.max_records_per_batch:,}, each batch one transaction. Trigger with a backfill range or time "
        f"window to replay history. Declared in `pipelines/{pipeline.name}.yaml`.\n\n{pipeline.description}"
    )
    with DAG(
        dag_id=pipeline.dag_id,
        schedule=_schedule(pipeline),
        start_date=START_DATE,
        catchup=False,
        # By default runs of one pipeline queue behind each other; whatever races anyway (more active runs,
        # backfills, manual job runs) is settled by the ledger fence.
        max_active_runs=pipeline.max_active_runs,
        tags=["microingest", *topic_tags(pipeline)],
        doc_md=doc,
        params=pipeline_params(pipeline),
        # Transient trouble (broker, Postgres, a lost executor) fails a task with nothing committed; the retry
        # re-runs the same plan. Refusals that would repeat (fenced, too many dead letters) skip the retries.
        default_args={
            "owner": "microingest",
            "retries": pipeline.retries,
            "retry_delay": timedelta(seconds=pipeline.retry_delay_seconds),
            "retry_exponential_backoff": 2.0,
            "max_retry_delay": timedelta(minutes=10),
        },
    ) as dag:
        # A teardown: it runs when ingest succeeded, failed for good or was skipped, and never decides the run's state.
        @task(
            task_id="announce",
            inlets=[asset],
            outlets=[asset],
            doc_md=f"Announce the batches this run committed "
            f"as an event of Asset `{asset.name}` (once each, retries and failures included), and write the run's "
            "note.",
        )
        def announce(**context):
            from microingest.airflow.announce_task import announce  # when the task runs: parsing imports no commit

            announce(pipeline, asset, context)

        ingest = SparkIngestOperator(
            task_id="ingest",
            pipeline=pipeline,
            doc_md="Plan the run from its Params, the ledger and Kafka (a live run up to the last stable offsets, or "
            "a backfill, a skip, a redrive; the plan is the task's XCom `plan_summary`), then read the planned ranges "
            "with Spark, batch by batch; each batch's rows, dead letters, ledger and history are committed in one "
            "Postgres transaction. Skipped, with no Spark job, when there is nothing to do or on a dry run.",
        )
        ingest >> announce().as_teardown()
        if pipeline.lag.gate:
            gate = pipeline.lag.gate
            (
                LagGateSensor(
                    task_id=GATE_TASK_ID,
                    pipeline=pipeline,
                    doc_md=(
                        f"Scheduled runs wait (deferred, in the triggerer) until {gate.min_records:,} records wait or "
                        "the "
                        f"oldest is {gate.max_wait_seconds}s old; after {gate.wait_seconds}s without either the run is "
                        "skipped. Manual and backfill runs pass."
                    ),
                )
                >> ingest
            )
    return dag


def _schedule(pipeline: Pipeline) -> CronDataIntervalTimetable | list | None:
    """A cron's runs with data intervals, not Airflow 3's default cron trigger (whose runs have an empty interval): a
    run of Airflow's own backfill replays the records timestamped inside its interval. Or runs woken by records
    (event-driven scheduling: the DAG scheduled on an Asset its trigger watches)."""
    if pipeline.woken_by_records:
        return [records_asset(pipeline)]
    return CronDataIntervalTimetable(pipeline.schedule, timezone="UTC") if pipeline.schedule else None


def topic_tags(pipeline: Pipeline) -> list[str]:
    """A tag per topic named, or the pattern's. Airflow refuses a DAG whose tag is longer than 100 characters, and so
    the whole DAG file, every pipeline's DAG with it; a Kafka topic may have 249. A cut tag still finds the topic's
    DAGs by its start."""
    if pipeline.topic_pattern is not None:
        return [f"topic_pattern:{pipeline.topic_pattern}"[:_TAG_MAX_LEN]]
    return [f"topic:{topic}"[:_TAG_MAX_LEN] for topic in pipeline.topics]


SLA_DAG_ID = "microingest_lag_sla"


def build_sla_dag(pipelines: list[Pipeline]) -> DAG | None:
    """One DAG checking every pipeline that declares `lag.sla`, every five minutes; a breach fails its task."""
    watched = [p for p in pipelines if p.lag.sla]
    if not watched:
        return None
    with DAG(
        dag_id=SLA_DAG_ID,
        schedule="*/5 * * * *",
        start_date=START_DATE,
        catchup=False,
        max_active_runs=1,
        tags=["microingest", "lag"],
        doc_md="Lag SLA of the pipelines that declare `lag.sla`: a task fails "
        "(and fires the failure callbacks) when its pipeline's time lag exceeds max_time_lag_seconds, or when "
        "it stays STALL, STOP or ERR for grace_seconds.",
        default_args={"owner": "microingest", "retries": 0},
    ) as dag:
        for pipeline in watched:
            LagSlaSensor(task_id=f"sla_{pipeline.name}", pipeline=pipeline)
    return dag


def build_dags() -> dict[str, DAG]:
    """DAGs of the valid declarations; malformed ones are reported by `declaration_errors` instead.

    A task's process parses the DAG file for its own DAG (Airflow's parsing context names it): that DAG alone is
    built, from its one declaration, not every pipeline's (1.7 s for 118 of them here, paid by every task)."""
    if (wanted := get_parsing_context().dag_id) is not None and (dag := _only(wanted)) is not None:
        return {wanted: dag}
    pipelines, _ = buildable()
    dags = {p.dag_id: build_dag(p) for p in pipelines}
    if sla := build_sla_dag(pipelines):
        dags[SLA_DAG_ID] = sla
    return dags


def _only(dag_id: str) -> DAG | None:
    """The DAG of the pipeline `dag_id` names, or None when it names none that builds (the SLA DAG, which watches
    every pipeline; a declaration gone or broken since), left to the whole build."""
    if dag_id == SLA_DAG_ID or not dag_id.startswith(DAG_ID_PREFIX):
        return None
    try:
        pipeline = get_pipeline(dag_id.removeprefix(DAG_ID_PREFIX))
        return build_dag(pipeline) if pipeline.dag_id == dag_id else None
    except (AirflowNotFoundException, MicroingestError):  # a DeclarationError is one
        return None


def declaration_errors() -> list[DeclarationError]:
    return buildable()[1]


def buildable() -> tuple[list[Pipeline], list[DeclarationError]]:
    """The valid declarations whose target Asset resolves, and the errors of the others: a pipeline whose Postgres
    connection is missing or unreadable fails alone."""
    pipelines, errors = load_declarations()
    ok = []
    for pipeline in pipelines:
        try:
            target_asset(pipeline)
        except (AirflowNotFoundException, MicroingestError) as exc:
            errors.append(
                DeclarationError(
                    pipeline.source or pipeline.name,
                    "postgres_conn_id",
                    f"connection '{pipeline.postgres_conn_id}' names no target: {exc}",
                )
            )
        else:
            ok.append(pipeline)
    return ok, errors
