"""Reports malformed pipelines/*.yaml as this file's import error (naming each file and field), so that the DAGs
of all the other pipelines, built by microingest_pipelines.py, stay available. Defines no DAG (airflow dag)."""

from microingest.airflow.dag_factory import declaration_errors

if errors := declaration_errors():
    raise ValueError("malformed pipeline declarations:\n" + "\n".join(str(e) for e in errors))
