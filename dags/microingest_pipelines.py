"""DAGs of all pipelines declared in pipelines/*.yaml (one DAG per pipeline, id microingest_<name>)."""

from microingest.airflow.dag_factory import build_dags

globals().update(build_dags())
