"""`make compose-test`: docker-compose.yml built and run under podman. Not part of `make test` (it builds images
from nothing in several minutes); a developer runs it by hand when the images or the compose file change."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from helpers.compose_stack import DATA_SERVICES, Stack
from microingest.settings import repo_root, state_dir

FIGURES = state_dir() / "compose" / "figures.json"
# The declarations the stack serves (MICROINGEST_PIPELINES): the repository's examples.
SERVED = ("demo_events.yaml", "orders.yaml")


@pytest.fixture(scope="session")
def stack():
    stack = Stack("microingest-test", state_dir() / "compose")
    pipelines = stack.state / "pipelines"
    shutil.rmtree(pipelines, ignore_errors=True)
    pipelines.mkdir()
    for name in SERVED:
        shutil.copyfile(repo_root() / "pipelines" / name, pipelines / name)
    stack.env["MICROINGEST_PIPELINES"] = str(pipelines)
    stack.start_engine()
    figures: dict = {}
    try:
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
            stack.down(volumes=True)
        finally:
            stack.stop_engine()
