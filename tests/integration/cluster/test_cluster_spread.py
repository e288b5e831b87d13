"""The cluster topology (`make up TOPOLOGY=cluster`) really is one: three brokers replicating every topic, a pipeline
DAG whose tasks run on both Airflow workers, and batches whose Spark tasks run on both Spark workers.

Which idle Edge worker takes a queued task is a race, so the test decides it the way an operator would when draining a
worker for maintenance: with one worker in maintenance the DAG's run must go to the other, and nothing stalls."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from helpers.pipeline_env import SERVED_FOLDER, new_env
from local_platform import config
from local_platform.faults.cluster import edge_worker_states
from microingest.systems.kafka_access import create_topic

pytestmark = pytest.mark.skipif(
    os.environ.get("MICROINGEST_TOPOLOGY") != "cluster",
    reason="runs against `make up TOPOLOGY=cluster` (the cluster stage of `make test`)",
)

WORKERS = ("edge-worker-1", "edge-worker-2")


def _json(url: str):
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def _edge(*args: str, check: bool = True) -> str:
    done = subprocess.run(["airflow", "edge", *args], capture_output=True, text=True, timeout=120)
    if check and done.returncode:
        raise AssertionError(f"airflow edge {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def _states(api) -> dict[str, str]:
    """Read from the API server: an `airflow edge list-workers` process each poll would cost seconds of CPU."""
    return edge_worker_states(api)


def _maintenance(api, worker: str, on: bool, check: bool = True) -> None:
    """Drain a worker (or bring it back), and wait until it has taken note: until then it may still fetch jobs."""
    if on:
        _edge("remote-edge-worker-request-maintenance", "-H", worker, "--comments", "cluster test", check=check)
    else:
        _edge("remote-edge-worker-exit-maintenance", "-H", worker, check=check)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = _states(api)[worker]
        if (state == "maintenance mode") if on else (state in ("idle", "running")):
            return
        time.sleep(1)
    raise AssertionError(f"{worker} still {state!r}")


def _hosts(api, dag_id: str, run_id: str) -> dict[str, str]:
    tis = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {ti["task_id"]: ti["hostname"] for ti in tis if ti["state"] == "success"}


def test_topics_are_replicated_three_times_and_need_two_in_sync(kafka):
    admin = KafkaAdminClient(**kafka)
    topic = f"cluster-{uuid.uuid4().hex[:8]}"
    try:
        assert sorted(b["broker_id"] for b in admin.describe_cluster()["brokers"]) == [1, 2, 3]
        create_topic(kafka, topic, 3)
        deadline = time.monotonic() + 60
        while len(partitions := admin.describe_topics([topic])[0]["partitions"]) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)  # a new topic reaches every broker's metadata a moment after it is created
        assert sorted(sorted(p["replica_nodes"]) for p in partitions) == [[1, 2, 3]] * 3
        config = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        assert config["topic"][topic]["min.insync.replicas"]["value"] == "2"
    finally:
        admin.delete_topics([topic])
        admin.close()


def test_a_pipeline_dag_runs_on_both_airflow_workers_and_its_batches_on_both_spark_workers(pg, kafka, api):
    master = _json(f"http://127.0.0.1:{config.SPARK_MASTER_UI_PORT}/json/")
    assert sum(w["state"] == "ALIVE" for w in master["workers"]) == 2
    connect_ui = f"http://127.0.0.1:{config.SPARK_CONNECT_UI_PORT}/api/v1/applications"
    app = _json(connect_ui)[0]["id"]
    # Each executor's log links name the worker (its UI port) that runs it.
    worker_of = {
        e["id"]: e["executorLogs"]["stdout"].split("//", 1)[1].split("/", 1)[0]
        for e in _json(f"{connect_ui}/{app}/executors")
        if e["id"] != "driver" and e["isActive"]
    }
    assert len(set(worker_of.values())) == 2, f"the Connect server's executors: {worker_of}"
    stages_before = {s["stageId"] for s in _json(f"{connect_ui}/{app}/stages")}

    suffix = uuid.uuid4().hex[:8]
    env = new_env(pg, kafka, Path(SERVED_FOLDER), f"cluster_{suffix}", f"cluster-{suffix}")
    api.wait_for_dag(env.pipeline.dag_id, timeout=240, say=lambda m: None)
    api.unpause(env.pipeline.dag_id)
    hosts, notes, produced = {}, {}, []
    # Both workers registered and fetching jobs before one is drained: a worker not yet known cannot be.
    deadline = time.monotonic() + 120
    while any(_states(api).get(w) not in ("idle", "running") for w in WORKERS) and time.monotonic() < deadline:
        time.sleep(1)
    try:
        for i, (drained, serving) in enumerate((WORKERS[::-1], WORKERS)):
            _maintenance(api, drained, True)
            produced += env.produce(6000, start=6000 * i)  # 3 Spark tasks of 2,000 records
            run_id = api.trigger(env.pipeline.dag_id)
            run = api.wait_for_run(env.pipeline.dag_id, run_id, timeout=600)
            assert run.state == "success", run.describe()
            hosts[serving] = _hosts(api, env.pipeline.dag_id, run_id)
            notes[run_id] = api.note(env.pipeline.dag_id, run_id)
            _maintenance(api, drained, False)
    finally:
        for worker in WORKERS:
            if _states(api)[worker] != "idle":
                _maintenance(api, worker, False, check=False)

    for serving, tasks in hosts.items():
        assert set(tasks) == {"ingest", "announce"} and set(tasks.values()) == {serving}, hosts
    env.assert_exactly_once(produced)
    # written by the announce task as the run-notes user, whose FAB role may edit runs
    assert all(
        note and note.startswith("1 batch, 6,000 records, 6,000 rows, 0 dead letters") for note in notes.values()
    ), notes

    new_stages = [s for s in _json(f"{connect_ui}/{app}/stages") if s["stageId"] not in stages_before]
    executors = {
        t["executorId"]
        for s in new_stages
        for t in _json(f"{connect_ui}/{app}/stages/{s['stageId']}/{s['attemptId']}/taskList")
    }
    assert {worker_of[e] for e in executors} == set(worker_of.values()), (executors, worker_of)
