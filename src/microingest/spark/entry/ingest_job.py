"""Spark job: ingest a run's planned Kafka offset ranges of one pipeline into Postgres, batch by batch, exactly once.

Started by the pipeline DAG's `ingest` task (microingest.airflow.operators.SparkIngestOperator): by spark-submit, or,
with `--spark-connect <conn_id>`, as a plain Python client of a long-lived Spark Connect server
(microingest.spark.connect). Its arguments are microingest.spark.submit's contract; connections come from
AIRFLOW_CONN_* environment variables set for this process. It reports its outcome (microingest.errors) in the file
MICROINGEST_OUTCOME_FILE names and by its exit code.

A script, not a module: it ships inside the package (settings.spark_job_path) in a folder of its own, since Python
puts a script's folder first on sys.path.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import uuid

from pyspark.sql import SparkSession

from microingest.batches import JobFailure, RunOutcome
from microingest.declare.files import get_pipeline
from microingest.errors import MicroingestError, exit_code_of
from microingest.spark.connect import interrupt_own, job_session
from microingest.spark.job import IngestJob
from microingest.spark.redrive import redrive_plan
from microingest.spark.run import run_plan
from microingest.spark.submit import parse_job_args
from microingest.systems.connections import get_connection
from microingest.systems.pipeline_systems import PipelineSystems


def main(argv: list[str]) -> int:
    args = parse_job_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    outcome = RunOutcome()
    spark = job = None
    finished = False
    try:
        # Refusals before Spark starts count too: a declaration broken since the plan, a malformed connection.
        pipeline = get_pipeline(args.pipeline)
        systems = PipelineSystems.of(pipeline)
        if args.plan.kind == "redrive":  # dead letters read from Postgres and decoded here: no Spark session
            redrive_plan(IngestJob(None, pipeline, systems, args.run), args.plan, outcome)
        else:
            spark = session(pipeline.name, args.spark_connect)
            job = IngestJob.start(spark, pipeline, systems, args.run)
            run_plan(job, args.plan, outcome)
        finished = True
    except MicroingestError as exc:  # nothing of the failing batch was committed; the outcome says whether to retry
        finished = True
        print(f"microingest: {type(exc).__name__}: {exc}", file=sys.stderr)
        outcome.failure = JobFailure.of(exc)
        write_outcome(outcome.to_dict())
        return exit_code_of(exc)
    finally:
        if job is not None:
            job.close()
        if spark is not None:
            if args.spark_connect and not finished:
                interrupt_own(spark)
            spark.stop()
    write_outcome(outcome.to_dict())
    print("microingest: " + json.dumps(outcome.to_dict()))
    return 0


def session(name: str, connect_conn_id: str | None):
    """A Spark application of this process's own, or a session on a Spark Connect server."""
    if not connect_conn_id:
        return SparkSession.builder.appName(f"microingest-{name}").getOrCreate()
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
