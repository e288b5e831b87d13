"""Airflow integration: the DAG factory and operators. The only part of the package that imports Airflow."""
