"""One DAG per declared pipeline: plan (no Spark) -> ingest (Spark job, one Postgres transaction per batch)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, CronDataIntervalTimetable, task

from microingest.airflow.operators import SparkIngestOperator
from microingest.airflow.params import pipeline_params
from microingest.declarations import DeclarationError, Pipeline, load_declarations

START_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def build_dag(pipeline: Pipeline) -> DAG:
    doc = (f"Ingest Kafka topic `{pipeline.topic}` into `{pipeline.target_table}` ({pipeline.sink_mode}): each run "
           f"reads up to {pipeline.max_records_per_run:,} records in batches of at most "
           f"{pipeline.max_records_per_batch:,}, each batch one transaction. Trigger with a backfill range or time "
           f"window to replay history. Declared in `pipelines/{pipeline.name}.yaml`.\n\n{pipeline.description}")
    with DAG(
        dag_id=pipeline.dag_id,
        # Data intervals, not Airflow 3's default cron trigger (whose runs have an empty interval): a run of
        # Airflow's own backfill replays the records timestamped inside its interval.
        schedule=CronDataIntervalTimetable(pipeline.schedule, timezone="UTC") if pipeline.schedule else None,
        start_date=START_DATE,
        catchup=False,
        # By default runs of one pipeline queue behind each other; whatever races anyway (more active runs,
        # backfills, manual job runs) is settled by the ledger fence.
        max_active_runs=pipeline.max_active_runs,
        tags=["microingest", f"topic:{pipeline.topic}"],
        doc_md=doc,
        params=pipeline_params(pipeline),
        # Transient trouble (broker, Postgres, a lost executor) fails a task with nothing committed; the retry
        # re-runs the same plan. Refusals that would repeat (fenced, too many dead letters) skip the retries.
        default_args={"owner": "microingest", "retries": pipeline.retries,
                      "retry_delay": timedelta(seconds=pipeline.retry_delay_seconds),
                      "retry_exponential_backoff": 2.0, "max_retry_delay": timedelta(minutes=10)},
    ) as dag:

        @task.short_circuit(task_id="plan", doc_md="Plan the run from its Params, the ledger and Kafka: a live run "
                            "up to the last stable offsets, or a backfill; skip Spark when there is nothing to do.")
        def plan(**context):
            from microingest.airflow.plan_task import plan_for_run

            return plan_for_run(pipeline, context)

        plan() >> SparkIngestOperator(task_id="ingest", pipeline=pipeline,
                                      doc_md="Read the planned ranges with Spark, batch by batch; each batch's rows, "
                                      "dead letters, ledger and history are committed in one Postgres transaction.")
    return dag


def build_dags() -> dict[str, DAG]:
    """DAGs of the valid declarations; malformed ones are reported by `declaration_errors` instead."""
    pipelines, _ = load_declarations()
    return {p.dag_id: build_dag(p) for p in pipelines}


def declaration_errors() -> list[DeclarationError]:
    return load_declarations()[1]
