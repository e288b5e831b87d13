"""Spark job: ingest a run's planned Kafka offset ranges of one pipeline into Postgres, batch by batch, exactly once.

Started by the pipeline DAG's `ingest` task (microingest.airflow.operators.SparkIngestOperator): by spark-submit, or,
with `--spark-connect <conn_id>`, as a plain Python client of a long-lived Spark Connect server
(microingest.spark.connect). All logic lives in the microingest package. Connections come from AIRFLOW_CONN_*
environment variables set for this process.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import uuid

from pyspark.sql import SparkSession

from microingest.commit.history import RunInfo
from microingest.declare.declarations import get_pipeline
from microingest.errors import MicroingestError, exit_code_of, outcome_of
from microingest.lag.mirror import GroupMirror
from microingest.plan.offsets import RunPlan
from microingest.spark.batches import RunProgress, run_plan
from microingest.systems.connections import get_connection, kafka_python_config, postgres_params, spark_kafka_options


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipeline", required=True)
    parser.add_argument("--plan", required=True, help="JSON run plan: {kind, ranges, batch_cap, time_budget_seconds, "
                        "overlap}")
    parser.add_argument("--run", default="{}", help="JSON {dag_id, run_id, task_try, kind} for the batch history")
    parser.add_argument("--spark-connect", metavar="CONN_ID",
                        help="run on the Spark Connect server of this connection instead of a Spark application of "
                             "its own")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    pipeline = get_pipeline(args.pipeline)
    plan = RunPlan.from_dict(json.loads(args.plan))
    pg = postgres_params(get_connection(pipeline.postgres_conn_id))
    kafka = spark_kafka_options(get_connection(pipeline.kafka_conn_id))

    spark = session(pipeline.name, args.spark_connect)
    progress = RunProgress()
    mirror = GroupMirror(kafka_python_config(get_connection(pipeline.kafka_conn_id)), pipeline.name, pipeline.topic)
    finished = False
    try:
        run_plan(spark, pipeline, plan, pg, kafka, RunInfo.from_dict(json.loads(args.run)), progress, mirror=mirror)
        finished = True
    except MicroingestError as exc:  # the job ran and did not commit the batch; the outcome says whether to retry
        finished = True
        print(f"microingest: {type(exc).__name__}: {exc}", file=sys.stderr)
        write_outcome({**outcome_of(exc), **progress.to_dict()})
        return exit_code_of(exc)
    finally:
        mirror.close()
        if args.spark_connect and not finished:
            from microingest.spark.connect import interrupt_own

            interrupt_own(spark)
        spark.stop()
    outcome = {"status": "committed", **progress.to_dict()}
    write_outcome(outcome)
    print("microingest: " + json.dumps(outcome))
    return 0


def session(name: str, connect_conn_id: str | None):
    """A Spark application of this process's own, or a session on a Spark Connect server."""
    if not connect_conn_id:
        return SparkSession.builder.appName(f"microingest-{name}").getOrCreate()
    from microingest.spark.connect import job_session

    spark = job_session(get_connection(connect_conn_id), f"microingest-{name}-{uuid.uuid4().hex}")
    # Killed (the task's on_kill, a timeout): unwind, so the batch's staging is discarded and the server's work
    # for this job is interrupted.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    return spark


def write_outcome(outcome: dict) -> None:
    """For the submitting operator (client deploy mode: same machine), which turns it into XCom or a clear error."""
    path = os.environ.get("MICROINGEST_OUTCOME_FILE")
    if path:
        with open(path, "w") as f:
            json.dump(outcome, f)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
