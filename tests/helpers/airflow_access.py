"""Reaching the running Airflow from tests: a DAG run through `airflow dags test`, and plain HTTP to the api-server
(for the plugin's routes, with or without a token)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.error
import urllib.request

from microingest.systems.airflow_api import base_url


def run_dag(env, conf: dict | None = None, **extra_env) -> subprocess.CompletedProcess:
    conf_args = ["--conf", json.dumps(conf)] if conf else []
    return subprocess.run(
        ["airflow", "dags", "test", env.pipeline.dag_id, *conf_args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MICROINGEST_PIPELINES_DIR": str(env.pipelines_dir), **extra_env},
    )


def get(path: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(base_url() + path)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
