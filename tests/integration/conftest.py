"""Fixtures for tests against the real platform started by `make test` (Kafka, Postgres, Spark, Airflow's DB).

Every test gets its own topic, target table and pipeline declaration, so tests never see each other's data; what
builds them is in helpers/pipeline_env.py.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from helpers import browser_session
from helpers.pipeline_env import SERVED_FOLDER, Env, declare_served, job_result, own_env
from microingest.spark.submit import SUBMIT_CONN_ID
from microingest.systems.connections import get_connection, kafka_python_config, postgres_params, schema_registry_config

REPO = Path(__file__).resolve().parents[2]
REQUIRED_ENV = ("AIRFLOW_CONN_MICROINGEST_POSTGRES", "AIRFLOW_CONN_MICROINGEST_KAFKA", "AIRFLOW_HOME")
# kafka-python logs every connection at INFO: a failing test's report would be that chatter, not the failure.
logging.getLogger("kafka").setLevel(logging.WARNING)


@pytest.fixture(scope="session", autouse=True)
def platform_env():
    missing = [k for k in REQUIRED_ENV if not os.environ.get(k)]
    if missing:
        pytest.fail(f"integration tests need the platform: run them through `make test` (missing {missing})")


@pytest.fixture(scope="session")
def pg():
    return postgres_params(get_connection("microingest_postgres"))


@pytest.fixture(scope="session")
def kafka():
    return kafka_python_config(get_connection("microingest_kafka"))


@pytest.fixture
def finish():
    return job_result


@pytest.fixture
def env(pg, kafka, tmp_path, monkeypatch) -> Env:
    """A pipeline of the test's own whose Spark jobs run on the Spark Connect server `make test` starts: the same
    run_plan, Kafka source and commit as under spark-submit, without a JVM start (about 20 s) for every job. Modules
    whose subject is spark-submit itself (its command, the operator, executor fault points, a cluster) take
    `submit_env` instead."""
    return own_env(pg, kafka, tmp_path, monkeypatch)


@pytest.fixture
def submit_env(pg, kafka, tmp_path, monkeypatch) -> Env:
    """A pipeline of the test's own on the platform's spark-submit connection: each job a Spark application."""
    return own_env(pg, kafka, tmp_path, monkeypatch, spark_conn_id=SUBMIT_CONN_ID)


@pytest.fixture
def browser():
    yield from browser_session.chrome()


@pytest.fixture(scope="session")
def api():
    from microingest.systems.airflow_api import AirflowClient

    return AirflowClient()


@pytest.fixture(scope="session")
def served(pg, kafka, api) -> dict[str, Env]:
    folder = Path(SERVED_FOLDER)
    if not SERVED_FOLDER or folder.resolve() == (REPO / "pipelines").resolve():
        pytest.fail(
            "the running Airflow serves the repository's pipelines/; `make test` restarts it on a folder "
            "of the suite's own (the tests would otherwise declare pipelines in pipelines/)"
        )
    envs = declare_served(pg, kafka, folder)
    for env in envs.values():
        api.wait_for_dag(env.pipeline.dag_id, timeout=240, say=lambda m: None)
        if not env.pipeline.schedule:  # a scheduled one is unpaused by its test, when its scheduled runs may start
            api.unpause(env.pipeline.dag_id)
    return envs


@pytest.fixture(scope="session")
def registry() -> dict:
    """The schema registry `make test` starts, as confluent_kafka's SchemaRegistryClient settings."""
    return schema_registry_config(get_connection("microingest_schema_registry"))
