"""What keeps the cluster busy during the soak: a producer, one pipeline per sink mode plus a gated one (its sensor
deferred in the triggerer most of the time), live runs triggered back to back through the REST API, and backfill
runs replacing the latest offsets of the append pipeline beside its live runs."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from helpers.exactly_once import SinkPipelines, declare_sink_pipelines
from helpers.pipeline_env import Env, new_env
from microingest.spark.submit import SUBMIT_CONN_ID
from microingest.systems.airflow_api import AirflowApiError

BACKFILL_SPAN = 3000  # offsets per partition a backfill run replaces, below the live position


def declare(pg, kafka, folder: Path, suffix: str, topic: str) -> tuple[SinkPipelines, Env]:
    """The sink pipelines (aggregate's jobs by spark-submit, the rest on the Connect server) and the gated one."""
    # Retries come quickly (1 s, doubling): the faults come every 10 s, and a task still waiting out its backoff once
    # they ended (40 s at 5 s a start) only delays the convergence; a run out of retries fails saying why, and the
    # driver triggers the next.
    common = {
        "max_records_per_batch": 2000,
        "dead_letter": {"max_fraction": 0.5},
        "retries": 4,
        "retry_delay_seconds": 1,
    }
    sinks = declare_sink_pipelines(
        pg,
        kafka,
        folder,
        f"soak_{suffix}",
        topic,
        common,
        per_role={"agg": {"spark_conn_id": SUBMIT_CONN_ID}, "append": {"max_active_runs": 2}},
    )
    # Its gate opens only once the oldest unread record is 120 s old, so a run that starts a minute after the last
    # one read waits deferred for about a minute (the triggerer's fault waits for that), then reads.
    gated = new_env(
        pg,
        kafka,
        folder,
        f"soak_{suffix}_gated",
        topic,
        schedule="* * * * *",
        **common,
        lag={"gate": {"min_records": 1_000_000_000, "max_wait_seconds": 120, "wait_seconds": 180, "poke_seconds": 10}},
    )
    return sinks, gated


def active_runs(api, dag_id: str) -> list[dict]:
    return api.get(f"/api/v2/dags/{dag_id}/dagRuns", state=["queued", "running"], limit=50)["dag_runs"]


def is_backfill(run: dict) -> bool:
    return bool((run.get("conf") or {}).get("backfill_ranges"))


class Driver(threading.Thread):
    """Triggers a live run of each pipeline whenever it has none active, and a backfill run of `backfilled` whenever
    it has none; Airflow's API being down (a fault) only delays it."""

    def __init__(self, api, live: list[Env], backfilled: Env):
        super().__init__(daemon=True)
        self.api, self.live, self.backfilled = api, live, backfilled
        self.stopping = threading.Event()
        self.counts = Counter()

    def run(self) -> None:
        while not self.stopping.is_set():
            for env in self.live:
                self._step(env)
            self.stopping.wait(2)

    def _step(self, env: Env) -> None:
        dag_id = env.pipeline.dag_id
        try:
            active = active_runs(self.api, dag_id)
            if not any(not is_backfill(r) for r in active):
                self.api.trigger(dag_id, note="soak: live")
                self.counts["live runs triggered"] += 1
            if env is self.backfilled and not any(is_backfill(r) for r in active):
                ranges = backfill_ranges(env)
                if ranges:
                    self.api.trigger(dag_id, {"backfill_ranges": ranges, "overlap": "replace"}, note="soak: backfill")
                    self.counts["backfill runs triggered"] += 1
        except AirflowApiError:
            self.counts["API calls failed"] += 1
        except Exception:  # Postgres down while reading the ledger, say: the next round tries again
            self.counts["driver rounds failed"] += 1


def backfill_ranges(env: Env) -> dict[str, list[int]]:
    """The last BACKFILL_SPAN offsets below the live position of each partition that has any."""
    return {str(p): [max(0, until - BACKFILL_SPAN), until] for p, until in sorted(env.ledger().items()) if until > 0}


def wait_until_caught_up(envs: list[Env], end: dict[int, int], timeout: float) -> tuple[dict[str, float], list[str]]:
    """Until every pipeline's live position is the topic's end: when each caught up (seconds from the start; the
    slowest is the convergence's), and the pipelines still behind when `timeout` passed first."""
    started = time.monotonic()
    caught_up: dict[str, float] = {}
    while True:
        for env in envs:
            name = env.pipeline.name
            if name not in caught_up and all(env.ledger().get(p, 0) >= o for p, o in end.items()):
                caught_up[name] = round(time.monotonic() - started, 1)
        behind = [e.pipeline.name for e in envs if e.pipeline.name not in caught_up]
        if not behind or time.monotonic() - started > timeout:
            return caught_up, behind
        time.sleep(5)


def why_behind(api, envs: list[Env], end: dict[int, int]) -> dict[str, dict]:
    """For a pipeline that did not catch up: where its ledger stands against the topic's end, its active runs with
    their tasks' states and tries, and the last lines of each unfinished task's log (what it was doing)."""
    found: dict[str, dict] = {}
    for env in envs:
        dag_id = env.pipeline.dag_id
        entry: dict = {"end": end, "runs": []}
        try:
            entry["ledger"] = env.ledger()
            for run in active_runs(api, dag_id):
                path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances"
                tasks = api.get(path)["task_instances"]
                entry["runs"].append(
                    {
                        "run_id": run["dag_run_id"],
                        "state": run["state"],
                        "started": run.get("start_date"),
                        "tasks": {t["task_id"]: [t["state"], t["try_number"], t.get("hostname")] for t in tasks},
                        "log_tails": {
                            t["task_id"]: _log_tail(api, f"{path}/{t['task_id']}/logs/{t['try_number']}")
                            for t in tasks
                            if t["state"] in ("running", "deferred", "up_for_retry", "queued") and t["try_number"]
                        },
                    }
                )
        except Exception as exc:  # the diagnosis must not hide the failure it explains
            entry["error"] = repr(exc)
        found[env.pipeline.name] = entry
    return found


def _log_tail(api, path: str, lines: int = 12) -> list[str]:
    content = api.get(path, full_content="true").get("content", [])
    return [str(e.get("event", e) if isinstance(e, dict) else e)[:300] for e in content[-lines:]]
