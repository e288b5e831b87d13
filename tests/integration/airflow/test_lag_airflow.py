"""The lag sensors in the running Airflow: the gate defers to the triggerer and opens at its threshold; the lag SLA
sensor fails a pipeline that stalls."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

from microingest.airflow.dag_factory import SLA_DAG_ID
from microingest.batches import OffsetRange
from microingest.cli.remote_run import error_events
from microingest.lag.states import LagState
from microingest.lag.status import pipeline_status
from microingest.plan.live import plan_live_run
from microingest.systems.airflow_api import AirflowApiError


def service_log(service: str, *needles: str, limit: int = 20) -> str:
    """The latest lines of an Airflow service's log that mention one of `needles` or an error: what a failure here
    needs to be explained (a run waiting on the triggerer fails by timing out, which says nothing of why)."""
    path = Path(os.environ["AIRFLOW_HOME"]) / "logs" / f"{service}.log"
    lines = path.read_text(errors="replace").splitlines() if path.exists() else [f"(no {path})"]
    hits = [line[:300] for line in lines if any(n in line for n in needles) or "[error" in line or "Traceback" in line]
    return f"\n--- {service}.log ---\n" + "\n".join(hits[-limit:])


def scheduled_run_waiting(api, dag_id: str, timeout: float = 180) -> str:
    """The first scheduled run whose gate is deferred (its wait handed to the triggerer)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for listed in api.get(f"/api/v2/dags/{dag_id}/dagRuns", run_type="scheduled")["dag_runs"]:
            run = api.dag_run(dag_id, listed["dag_run_id"])
            if run.tasks.get("wait_for_records") == "deferred":
                return run.run_id
        time.sleep(2)
    raise AssertionError(f"no scheduled run of {dag_id} deferred its gate within {timeout}s")


def poked_with(api, run, answer: str, timeout: float = 180) -> None:
    """Until a poke of the run's gate logs that it is not met yet with `answer` (the check's summary)."""
    deadline = time.monotonic() + timeout
    while not any(
        "not met yet" in line and answer in line for line in map(json.dumps, api.log_events(run, "wait_for_records"))
    ):
        if time.monotonic() > deadline:
            raise AssertionError(f"no poke of the gate of {run.dag_id} answered '{answer}' within {timeout}s")
        time.sleep(2)


def test_the_gate_waits_in_the_triggerer_until_enough_records_wait(api, served):
    env = served["gated"]
    dag_id = env.pipeline.dag_id
    api.unpause(dag_id)
    try:
        run_id = scheduled_run_waiting(api, dag_id)
        first = env.produce(20)
        # 20 records are below min_records: a poke that saw them leaves the gate closed. Waited for in the gate's own
        # log, not for a few poke intervals: a slow triggerer may not have looked again by then.
        poked_with(api, api.dag_run(dag_id, run_id), "20 records wait")
        assert api.dag_run(dag_id, run_id).tasks["wait_for_records"] == "deferred"
        rest = env.produce(40, start=20)
        run = api.wait_for_run(dag_id, run_id, timeout=600)
    except (AssertionError, AirflowApiError) as exc:  # a timeout
        raise AssertionError(f"{exc}{service_log('triggerer', env.pipeline.name)}") from exc
    finally:
        api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": True})
    assert (run.state, run.tasks) == (
        "success",
        {"wait_for_records": "success", "ingest": "success", "announce": "success"},
    ), run.describe() + service_log("triggerer", env.pipeline.name) + service_log("scheduler", dag_id)
    opened = api.xcom(run, "wait_for_records")
    assert opened["status"] == "met" and opened["offset_lag"] >= 50
    assert env.target_rows() == sorted(first + rest)


def test_the_sla_sensor_fails_a_pipeline_that_stalls(api, served):
    env = served["sla"]
    env.produce(60)
    # One job reads all of partition a and the first 5 records of b; then runs keep planning (observing) while b's
    # position never moves again and c is never started: with records waiting, both are STALL, a is OK.
    a, b, c = plan_live_run(env.pipeline).ranges
    assert env.spark_job([a, OffsetRange(b.topic, b.partition, 0, 5, None)]).returncode == 0
    for _ in range(10):  # the trend is read from the 10 latest observations of the window
        plan_live_run(env.pipeline)
    status = pipeline_status(env.pipeline)
    verdicts = {lag.partition: verdict for lag, verdict in status.partitions}
    assert verdicts[a.partition].state is LagState.OK
    assert verdicts[b.partition].state is LagState.STALL and "position stuck at 5" in verdicts[b.partition].reason
    assert verdicts[c.partition].state is LagState.STALL and "not started" in verdicts[c.partition].reason
    assert status.verdict.state is LagState.STALL
    # The plans' own: an SLA check DAG left unpaused (by an earlier session on this platform) records its own too.
    seen = env.query(
        "SELECT count(*) FROM microingest.lag_observations WHERE pipeline = %s AND partition = %s AND source = 'plan'",
        (env.pipeline.name, b.partition),
    )[0][0]
    assert seen == 11

    api.wait_for_dag(SLA_DAG_ID, say=lambda m: None)
    api.unpause(SLA_DAG_ID)
    try:
        run = api.wait_for_run(SLA_DAG_ID, api.trigger(SLA_DAG_ID), timeout=300)
    except (AssertionError, AirflowApiError) as exc:  # a timeout
        raise AssertionError(f"{exc}{service_log('triggerer', env.pipeline.name)}") from exc
    task = f"sla_{env.pipeline.name}"
    assert run.state == "failed" and run.tasks[task] == "failed", run.describe() + service_log(
        "triggerer", env.pipeline.name
    )
    errors = " ".join(error_events(api, run, task))
    assert "breached for longer than grace_seconds 15" in errors and "STALL" in errors, errors


def test_records_arriving_on_an_idle_topic_wake_the_pipeline(api, served):
    """schedule: on_records: no cron and no manual trigger; the AssetWatcher's trigger sees the records and the runs
    it wakes land them."""
    env = served["woken"]
    dag_id = env.pipeline.dag_id

    def runs():
        return api.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]

    def gate_pokes() -> int:  # each look of the trigger at the caught-up topic records an observation
        return env.query(
            "SELECT count(DISTINCT observed_at) FROM microingest.lag_observations WHERE pipeline = %s "
            "AND source = 'gate' AND observed_at > %s",
            (env.pipeline.name, unpaused),
        )[0][0]

    unpaused = datetime.now(timezone.utc)
    api.unpause(dag_id)
    try:
        deadline = time.monotonic() + 300
        while gate_pokes() < 2 and time.monotonic() < deadline:  # two looks: the trigger ran and decided
            time.sleep(1)
        assert gate_pokes() >= 2, "the trigger never looked" + service_log("triggerer", env.pipeline.name)
        assert runs() == [], "an idle topic woke the pipeline"
        sent = env.produce(12)
        deadline = time.monotonic() + 300
        while not runs() and time.monotonic() < deadline:
            time.sleep(2)
        assert runs(), "no run woke" + service_log("triggerer", env.pipeline.name)
        first = api.wait_for_run(dag_id, runs()[-1]["dag_run_id"], timeout=600)
        # The producer's records may straddle two looks of the trigger: the next wake takes what the first left.
        while env.target_rows() != sorted(sent) and time.monotonic() < deadline:
            time.sleep(2)
        woken = [api.wait_for_run(dag_id, r["dag_run_id"], timeout=600) for r in runs()]
    finally:
        api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": True})
    assert (first.state, first.tasks) == ("success", {"ingest": "success", "announce": "success"}), (
        first.describe() + service_log("triggerer", env.pipeline.name)
    )
    assert {r["run_type"] for r in runs()} == {"asset_triggered"} and {r.state for r in woken} == {"success"}
    assert env.landed_once() == sorted(sent)
