"""Credentials and names: SASL settings flow from the Airflow connection to kafka-python and Spark, secrets stay out
of output, and injection attempts in declarations are rejected before anything runs."""

import json
import os
import re
import subprocess

import pytest

from microingest import settings
from microingest.live_planning import plan_next_batch


@pytest.fixture
def sasl(monkeypatch):
    path = settings.state_dir() / "kafka" / "sasl.json"
    if not path.exists():
        pytest.skip("the configured Kafka is not this platform's broker, which has the SASL listener")
    sasl = json.loads(path.read_text())

    def use(password):
        monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_KAFKA_SASL", json.dumps({"conn_type": "kafka", "extra": {
            "bootstrap.servers": sasl["bootstrap.servers"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": sasl["username"], "sasl.password": password}}))

    use(sasl["password"])
    return sasl, use


def test_sasl_connection_reaches_kafka_python_and_spark_and_its_password_is_never_printed(env, sasl):
    secrets, _ = sasl
    env.redeclare(kafka_conn_id="microingest_kafka_sasl")
    produced = env.produce(500)

    plan = plan_next_batch(env.pipeline)  # kafka-python through the SASL listener
    result = env.spark_job(list(plan.ranges))  # Spark's Kafka source through the SASL listener

    assert result.returncode == 0, result.stdout[-3000:]
    assert env.target_rows() == sorted(produced)
    assert secrets["password"] not in result.stdout + result.stderr
    assert secrets["password"] not in " ".join(result.args), "credentials never on the spark-submit command line"


def test_wrong_sasl_password_fails_clearly_and_commits_nothing(env, sasl):
    _, use = sasl
    use("not-the-password")
    env.redeclare(kafka_conn_id="microingest_kafka_sasl")
    env.produce(20)
    result = subprocess.run(["microingest", "plan", env.pipeline.name], capture_output=True, text=True, timeout=120,
                            env=os.environ)
    assert result.returncode == 2 and "microingest: error: Kafka at 127.0.0.1:9094" in result.stderr
    assert "not-the-password" not in result.stderr
    assert env.ledger() == {} and env.batches() == []


@pytest.mark.parametrize("field, value", [
    ("target_table", "public.x; DROP TABLE microingest.ledger"),
    ("topic", "events' OR '1'='1"),
    ("schema", {"amount\"; DROP TABLE x; --": "double"}),
    ("name", "x\"; DROP SCHEMA microingest CASCADE; --"),
])
def test_injection_attempts_in_a_declaration_are_rejected_before_anything_runs(env, field, value):
    path = env.pipelines_dir / f"{env.pipeline.name}.yaml"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    result = subprocess.run(["microingest", "plan", env.pipeline.name], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    shown = field if field != "schema" else "schema."
    assert f"field '{shown}" in result.stderr and re.search(r"is not a (valid|table)", result.stderr)
    assert env.query("SELECT to_regclass('microingest.ledger') IS NOT NULL") == [(True,)]
    assert env.ledger() == {} and env.batches() == []
