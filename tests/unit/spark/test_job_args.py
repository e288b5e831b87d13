"""The job's arguments are the one form a run plan takes from the ingest task's planning to the job: what job_args
writes, parse_job_args reads back unchanged."""

import json

import pytest

from microingest.batches import OffsetRange, RunInfo, RunPlan
from microingest.spark.submit import JobArgs, job_args, parse_job_args

PLAN = RunPlan(
    "backfill",
    (OffsetRange("orders", 0, 10, 20, None), OffsetRange("orders", 2, 0, 5, None)),
    7,
    None,
    "skip_existing",
    (1_700_000_000_000, 1_700_000_060_000),
)
RUN = RunInfo("microingest_orders", "manual__1", 2)


def test_what_the_operator_writes_the_job_reads_back():
    args = parse_job_args(job_args("orders", PLAN, RUN) + ["--spark-connect", "spark_connect"])
    assert args == JobArgs("orders", PLAN, RUN, "spark_connect")


def test_the_plan_on_the_command_line_is_the_planned_runs_dict():
    argv = job_args("orders", PLAN, RUN)
    assert json.loads(argv[argv.index("--plan") + 1]) == PLAN.to_dict()


def test_a_plan_that_is_not_json_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        parse_job_args(["--pipeline", "orders", "--plan", "{not json"])
    assert exit_.value.code == 2 and "--plan" in capsys.readouterr().err
