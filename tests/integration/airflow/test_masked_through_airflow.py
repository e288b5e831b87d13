"""A masked pipeline run by Airflow: its secrets (the masked values, and the keyed hash's key) reach the target only
masked, and appear in no task log, rendered template, XCom, lineage event or metric."""

import hashlib
import hmac
import json
import os
import secrets
import uuid

from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import create_engine, text

from helpers.airflow_access import run_dag
from helpers.platform_logs import platform_logs, written_since
from microingest.observe.metrics import PipelineCollector
from microingest.systems.kafka_access import produce


def airflow_texts(dag_id: str) -> list[str]:
    engine = create_engine(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    with engine.connect() as conn:
        found = [
            value
            for statement in (
                "SELECT rendered_fields::text FROM rendered_task_instance_fields WHERE dag_id = :d",
                "SELECT value::text FROM xcom WHERE dag_id = :d",
            )
            for value in conn.execute(text(statement), {"d": dag_id}).scalars().all()
        ]
    engine.dispose()
    return found


def lineage_texts(dag_id: str) -> list[str]:
    path = json.loads(os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"])["log_file_path"]
    with open(path) as f:
        return [line for line in f if f'"{dag_id}.' in line]


def test_a_masked_pipeline_leaves_no_secret_in_logs_xcom_lineage_or_metrics(env, monkeypatch):
    key = secrets.token_urlsafe(24)
    monkeypatch.setenv("AIRFLOW_CONN_IT_MASK_KEY", json.dumps({"conn_type": "generic", "password": key}))
    env.redeclare(mask={"user_id": "hmac_sha256", "event_type": "redact"}, mask_conn_id="it_mask_key", retries=0)
    hidden = [f"secret-{uuid.uuid4().hex}" for _ in range(40)]
    values = [
        json.dumps({"event_id": f"e{i}", "user_id": s, "event_type": f"kind of {s}", "amount": 1.5}).encode()
        for i, s in enumerate(hidden)
    ]
    values[3] = json.dumps({"event_id": "e3", "user_id": hidden[3], "amount": f"not a number {hidden[3]}"}).encode()
    produce(env.kafka, env.topic, [(s.encode(), v) for s, v in zip(hidden, values)])
    logs = platform_logs()

    result = run_dag(env)

    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = env.query(f"SELECT event_id, user_id, event_type FROM {env.pipeline.target_table}")
    assert sorted(rows) == sorted(
        (f"e{i}", hmac.new(key.encode(), s.encode(), hashlib.sha256).hexdigest(), "[redacted]")
        for i, s in enumerate(hidden)
        if i != 3
    )
    [(error_class, message, record_key, record_value)] = env.query(
        "SELECT error_class, error_message, record_key, record_value FROM microingest.dead_letters WHERE pipeline = %s",
        (env.pipeline.name,),
    )
    assert (error_class, record_key, record_value) == ("wrong_type", None, None) and "withheld" in message
    # The api-server's collector, over this test's pipeline (the server's own serves its pipelines folder only).
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(lambda: [env.pipeline]))
    metrics = generate_latest(registry).decode()
    assert f'microingest_records_read_total{{kind="ingest",pipeline="{env.pipeline.name}"}} 40.0' in metrics
    lineage = lineage_texts(env.pipeline.dag_id)
    assert lineage, "the run's lineage events are where the test looks"
    places = {
        "task logs": [result.stdout, result.stderr],
        "the platform's logs": list(written_since(logs).values()),
        "rendered templates and XCom": airflow_texts(env.pipeline.dag_id),
        "lineage": lineage,
        "metrics": [metrics],
        "the target": [repr(env.query(f"SELECT * FROM {env.pipeline.target_table}"))],
        "the batch history": [
            repr(env.query("SELECT * FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)))
        ],
    }
    for where, texts in places.items():
        for secret in [key, *hidden]:
            assert not any(secret in t for t in texts), f"a secret is in {where}"
