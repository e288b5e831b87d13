"""`make compose-test`: docker-compose.yml built and run under podman. Not part of `make test` (it builds images
from nothing in several minutes); a developer runs it by hand when the images or the compose file change."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest
import yaml

from helpers.compose_stack import AIRFLOW_URL, DATA_SERVICES, Stack
from microingest.settings import repo_root, state_dir
from microingest.systems.airflow_api import AirflowClient

FIGURES = state_dir() / "compose" / "figures.json"
# The declarations the stack serves (MICROINGEST_PIPELINES): the repository's examples, and the demo events' shape
# through spark-submit, a transform_sql statement and Protobuf values.
SERVED = ("demo_events.yaml", "orders.yaml")
VARIANTS = {
    "events_submit": {"spark_conn_id": "microingest_spark_submit"},
    "events_sql": {
        "transform_sql": "SELECT source_topic, source_partition, source_offset, upper(event_id) AS event_id, user_id, "
        "event_type, amount, event_time FROM batch WHERE event_type <> 'page_view'"
    },
    "events_proto": {
        "value_format": "protobuf",
        "schema": {"event_id": {"type": "string", "required": True}, "amount": "double", "event_time": "timestamp"},
    },
}


def declare(folder) -> None:
    for name in SERVED:
        shutil.copyfile(repo_root() / "pipelines" / name, folder / name)
    events = yaml.safe_load((repo_root() / "pipelines" / "demo_events.yaml").read_text())
    for name, changes in VARIANTS.items():
        declaration = {
            **events,
            "name": name,
            "topic": name.replace("_", "-"),
            "target_table": f"public.{name}",
            "schedule": None,
            **changes,
        }
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(declaration, sort_keys=False))


@pytest.fixture(scope="session")
def stack():
    keep = os.environ.get("MICROINGEST_COMPOSE_KEEP") == "1"  # a developer's loop: reuse the stack, leave it up
    stack = Stack("microingest-test", state_dir() / "compose", reuse=keep)
    pipelines = stack.state / "pipelines"
    shutil.rmtree(pipelines, ignore_errors=True)
    pipelines.mkdir()
    declare(pipelines)
    stack.env["MICROINGEST_PIPELINES"] = str(pipelines)
    stack.start_engine()
    figures: dict = {}
    try:
        if not keep:
            stack.down(volumes=True)  # whatever an earlier run left
        started = time.monotonic()
        figures["build_s"] = stack.build(stack.spec["services"])
        figures["build_total_s"] = time.monotonic() - started
        figures["up_s"] = stack.up()
        figures["healthy_s"] = stack.wait_healthy(DATA_SERVICES)
        figures["airflow_ready_s"] = stack.wait_airflow()
        figures["memory_mib"] = stack.memory_mib()
        stack.figures = figures
        yield stack
    finally:
        FIGURES.write_text(json.dumps(figures, indent=2))
        try:
            if not keep:
                stack.down(volumes=True)
        finally:
            stack.stop_engine()


@pytest.fixture(scope="session")
def platform(stack, tmp_path_factory):
    """This process's connections to the stack's published ports, as an operator's laptop would have them."""
    ca = tmp_path_factory.mktemp("kafka-ca") / "ca.pem"
    ca.write_bytes(stack.volume_file("kafka-ca", "ca.pem"))
    kafka = {
        "bootstrap.servers": "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "ingest",
        "sasl.password": stack.env["MICROINGEST_KAFKA_PASSWORD"],
        "ssl.ca.location": str(ca),
    }
    env = {
        "AIRFLOW_CONN_MICROINGEST_KAFKA": json.dumps({"conn_type": "kafka", "extra": kafka}),
        "AIRFLOW_CONN_MICROINGEST_POSTGRES": (
            f"postgresql://microingest:{stack.env['MICROINGEST_POSTGRES_PASSWORD']}@127.0.0.1:5432/microingest"
        ),
        "AIRFLOW__API__BASE_URL": AIRFLOW_URL,
        "MICROINGEST_PIPELINES_DIR": stack.env["MICROINGEST_PIPELINES"],
    }
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield AirflowClient(user="admin", password=stack.env["MICROINGEST_AIRFLOW_PASSWORD"])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
