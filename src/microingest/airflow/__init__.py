"""Airflow integration: the DAG factory and operators. The only part of the package that imports Airflow."""

# The XCom the plan task pushes for every run, dry or not, with what the run will do; `microingest backfill` and
# `microingest skip` print it. Here rather than in plan_task so that the command line reads it without Airflow.
PLAN_SUMMARY_KEY = "plan_summary"
