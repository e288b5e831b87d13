"""The cluster topology runs FAB's auth manager, as a deployment does: a Viewer reads a pipeline and its lag and is
refused a trigger; so is the run-notes user, whose role may edit runs (their notes: test_cluster_spread reads them)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import uuid
from pathlib import Path

import pytest

from helpers.pipeline_env import SERVED_FOLDER, new_env
from microingest import settings
from microingest.systems.airflow_api import AirflowApiError, AirflowClient

pytestmark = pytest.mark.skipif(
    os.environ.get("MICROINGEST_TOPOLOGY") != "cluster",
    reason="runs against `make up TOPOLOGY=cluster` (the cluster stage of `make test`)",
)


@pytest.fixture(scope="module")
def pipeline(pg, kafka, api):
    suffix = uuid.uuid4().hex[:8]
    env = new_env(pg, kafka, Path(SERVED_FOLDER), f"auth_{suffix}", f"auth-{suffix}")
    api.wait_for_dag(env.pipeline.dag_id, timeout=240, say=lambda m: None)
    return env.pipeline


def fab_user(role: str) -> AirflowClient:
    """A user of this role, made as an operator would (`airflow users create`, the password on standard input)."""
    name, password = f"{role.lower()}-{secrets.token_hex(3)}", secrets.token_urlsafe(16)
    argv = ["airflow", "users", "create", "--username", name, "--role", role, "--firstname", name]
    argv += ["--lastname", "test", "--email", f"{name}@microingest.invalid"]
    done = subprocess.run(argv, input=f"{password}\n{password}\n", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return AirflowClient(user=name, password=password)


def refused(call) -> int:
    with pytest.raises(AirflowApiError) as error:
        call()
    return error.value.status


def test_a_viewer_reads_a_pipeline_and_its_lag_and_cannot_trigger_it(api, pipeline):
    viewer, dag_id = fab_user("Viewer"), pipeline.dag_id
    assert viewer.get(f"/api/v2/dags/{dag_id}")["dag_id"] == dag_id
    assert pipeline.name in {s["pipeline"] for s in viewer.get("/microingest/lag.json")}
    assert refused(lambda: viewer.trigger(dag_id)) == 403
    assert api.get(f"/api/v2/dags/{dag_id}/dagRuns")["total_entries"] == 0


def test_the_run_notes_user_cannot_trigger_a_pipeline(api, pipeline):
    dag_id = pipeline.dag_id
    passwords = json.loads((settings.state_dir() / "airflow" / "passwords.json").read_text())
    notes_user = AirflowClient(user="microingest", password=passwords["microingest"])
    assert refused(lambda: notes_user.trigger(dag_id)) == 403
    assert api.get(f"/api/v2/dags/{dag_id}/dagRuns")["total_entries"] == 0
