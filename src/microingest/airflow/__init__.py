"""Airflow integration: the DAG factory and operators. The only part of the package that imports Airflow."""

# The XCom the ingest task pushes once it planned a run, dry or not, with what the run will do; `microingest backfill`
# and `microingest skip` print it. Here rather than in run_planning so that the command line reads it without Airflow.
PLAN_SUMMARY_KEY = "plan_summary"
GATE_TASK_ID = "wait_for_records"  # a pipeline's lag gate, before ingest
