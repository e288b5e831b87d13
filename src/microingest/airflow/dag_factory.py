"""One DAG per declared pipeline: plan (no Spark) -> ingest (Spark job, one Postgres transaction)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from airflow.sdk import DAG, task

from microingest.airflow.operators import SparkIngestOperator
from microingest.declarations import Pipeline, load_pipelines
from microingest.ledger import RunInfo

START_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)


def build_dag(pipeline: Pipeline) -> DAG:
    doc = (f"Ingest Kafka topic `{pipeline.topic}` into `{pipeline.target_table}` ({pipeline.sink_mode}), at most "
           f"{pipeline.max_records_per_batch} records per batch. Declared in `pipelines/{pipeline.name}.yaml`.\n\n"
           f"{pipeline.description}")
    with DAG(
        dag_id=pipeline.dag_id,
        schedule=pipeline.schedule,
        start_date=START_DATE,
        catchup=False,
        # By default runs of one pipeline queue behind each other; whatever races anyway (more active runs,
        # backfills, manual job runs) is settled by the ledger fence.
        max_active_runs=pipeline.max_active_runs,
        tags=["microingest", f"topic:{pipeline.topic}"],
        doc_md=doc,
        # Transient trouble (broker, Postgres, a lost executor) fails a task with nothing committed; the retry
        # re-runs the same plan. Refusals that would repeat (fenced, too many dead letters) skip the retries.
        default_args={"owner": "microingest", "retries": pipeline.retries,
                      "retry_delay": timedelta(seconds=pipeline.retry_delay_seconds),
                      "retry_exponential_backoff": 2.0, "max_retry_delay": timedelta(minutes=10)},
    ) as dag:

        @task.short_circuit(task_id="plan", doc_md="Plan offset ranges from the ledger and Kafka; skip Spark when "
                            "there is nothing new.")
        def plan(**context):
            from microingest.next_batch import plan_next_batch

            ti = context["ti"]
            result = plan_next_batch(pipeline, RunInfo(ti.dag_id, ti.run_id, ti.try_number))
            if not result.ranges:
                return None
            return {"ranges": [r.to_dict() for r in result.ranges], "records": result.total_records}

        plan() >> SparkIngestOperator(task_id="ingest", pipeline=pipeline,
                                      doc_md="Read exactly the planned ranges with Spark and commit rows + ledger in "
                                      "one Postgres transaction.")
    return dag


def build_dags() -> dict[str, DAG]:
    return {p.dag_id: build_dag(p) for p in load_pipelines()}
