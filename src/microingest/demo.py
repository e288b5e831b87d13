"""`make demo`: produce sample events, run the demo pipeline's DAG through Airflow, print the outcome.

Talks to the running platform only through its public faces: Kafka, Airflow's REST API (as the UI user) and
Postgres. Each run produces a fresh set of events, so a second run shows that only new records are ingested.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from psycopg2 import sql

from microingest import settings
from microingest.connections import get_connection, kafka_python_config, postgres_params
from microingest.declarations import get_pipeline
from microingest.identifiers import split_table_name
from microingest.kafka_access import create_topic, json_bytes, partition_bounds, produce
from microingest.lag import partition_lags
from microingest.postgres import connection

PIPELINE = "demo_events"
PARTITIONS = 3
EVENTS = int(os.environ.get("MICROINGEST_DEMO_EVENTS", "10000"))
API = os.environ.get("AIRFLOW__API__BASE_URL", "http://127.0.0.1:8080")
EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase")


def sample_events(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    out = []
    for i in range(n):
        user = f"user-{rnd.randrange(500):03d}"
        kind = rnd.choice(EVENT_TYPES)
        event = {"event_id": str(uuid.UUID(int=rnd.getrandbits(128))), "user_id": user, "event_type": kind,
                 "amount": round(rnd.uniform(1, 200), 2) if kind == "purchase" else None,
                 "event_time": (start + timedelta(milliseconds=i * 360)).isoformat()}
        out.append((user.encode(), json_bytes(event)))
    return out


class Airflow:
    """Minimal client of Airflow's public REST API v2, logged in as the simple auth manager's user."""

    def __init__(self, base: str, user: str, password: str):
        self.base = base.rstrip("/")
        self.token = self._request("POST", "/auth/token", {"username": user, "password": password},
                                   auth=False)["access_token"]

    def _request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        if auth:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")

    def get(self, path: str) -> dict:
        return self._request("GET", path)

    def patch(self, path: str, body: dict) -> dict:
        return self._request("PATCH", path, body)

    def post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, body)


def airflow_login() -> tuple[str, str]:
    path = Path(os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE",
                               settings.state_dir() / "airflow" / "simple_auth_manager_passwords.json"))
    return next(iter(json.loads(path.read_text()).items()))


def wait_for_dag(api: Airflow, dag_id: str, timeout: float = 180) -> None:
    deadline = time.time() + timeout
    while True:
        try:
            api.get(f"/api/v2/dags/{dag_id}")
            return
        except urllib.error.HTTPError as exc:
            if exc.code != 404 or time.time() > deadline:
                raise
        print(f"  waiting for the dag-processor to register {dag_id} ...", flush=True)
        time.sleep(5)


def run_dag(api: Airflow, dag_id: str, timeout: float = 900) -> list[dict]:
    """Unpause, trigger one run and wait for it and for any scheduled run the unpausing started.

    Returns every run that started during the demo, oldest first, with its task states."""
    since = datetime.now(timezone.utc).isoformat()
    api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": False})
    run_id = api.post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "note": "make demo"})["dag_run_id"]
    print(f"triggered {dag_id} run {run_id}", flush=True)
    deadline, seen = time.time() + timeout, None
    while time.time() < deadline:
        runs = api.get(f"/api/v2/dags/{dag_id}/dagRuns?" + urlencode({"order_by": "start_date",
                                                                        "start_date_gte": since}))["dag_runs"]
        runs += [r for r in api.get(f"/api/v2/dags/{dag_id}/dagRuns?state=running&state=queued")["dag_runs"]
                 if r["dag_run_id"] not in {x["dag_run_id"] for x in runs}]
        for r in runs:
            tis = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{r['dag_run_id']}/taskInstances")["task_instances"]
            r["tasks"] = {t["task_id"]: t["state"] or "none" for t in tis}
        line = "; ".join(f"{r['dag_run_id']} {r['state']}: "
                         + ", ".join(f"{k}={v}" for k, v in sorted(r["tasks"].items())) for r in runs)
        if line != seen:
            print(f"  {line}", flush=True)
            seen = line
        if runs and all(r["state"] in ("success", "failed") for r in runs):
            return runs
        time.sleep(3)
    raise TimeoutError(f"{dag_id} runs did not finish within {timeout:.0f}s")


def report(pipeline) -> None:
    pg = postgres_params(get_connection(pipeline.postgres_conn_id))
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT count(*), count(DISTINCT (source_partition, source_offset)) FROM {}").format(
            sql.Identifier(*split_table_name(pipeline.target_table))))
        rows, distinct = cur.fetchone()
        cur.execute("SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s ORDER BY partition",
                    (pipeline.name,))
        ledger = cur.fetchall()
        cur.execute("SELECT count(*), coalesce(sum(rows_written), 0), max(committed_at) FROM microingest.batches "
                    "WHERE pipeline = %s AND kind = 'ingest'", (pipeline.name,))
        batches, written, last = cur.fetchone()
        cur.execute("SELECT rows_written, extract(epoch FROM committed_at - started_at) FROM microingest.batches "
                    "WHERE pipeline = %s ORDER BY committed_at DESC LIMIT 1", (pipeline.name,))
        latest = cur.fetchone()
    lags = partition_lags(pipeline)
    print("\n=== outcome ===")
    print(f"rows in {pipeline.target_table}: {rows} ({distinct} distinct source positions)")
    print(f"batches committed: {batches} ({written} rows in all, last at {last})")
    if latest:
        print(f"last batch: {latest[0]} rows, {latest[1]:.1f}s from Spark start to commit")
    print("ledger (next offset to read) and remaining lag per partition:")
    for lag in lags:
        print(f"  {lag.topic}[{lag.partition}]: next {lag.next_offset}, latest {lag.latest}, lag {lag.lag}")
    print(f"total lag: {sum(l.lag for l in lags)}")
    user, password = airflow_login()
    print(f"\nAirflow UI: {API}/dags/{pipeline.dag_id}  (login: {user} / {password})")


def main() -> int:
    pipeline = get_pipeline(PIPELINE)
    kafka = kafka_python_config(get_connection(pipeline.kafka_conn_id))
    if create_topic(kafka, pipeline.topic, PARTITIONS):
        print(f"created topic {pipeline.topic} with {PARTITIONS} partitions")
    started = time.time()
    produced = len(produce(kafka, pipeline.topic, sample_events(EVENTS, seed=time.time_ns())))
    _, latest = partition_bounds(kafka, pipeline.topic)
    print(f"produced {produced} events in {time.time() - started:.1f}s; topic now holds {sum(latest.values())} "
          f"offsets across {len(latest)} partitions")
    api = Airflow(API, *airflow_login())
    wait_for_dag(api, pipeline.dag_id)
    started = time.time()
    runs = run_dag(api, pipeline.dag_id)
    print(f"DAG runs finished in {time.time() - started:.1f}s:")
    for r in runs:
        ingest = r["tasks"].get("ingest")
        note = {"skipped": "nothing new, Spark not started", "success": "batch committed"}.get(ingest, ingest)
        print(f"  {r['dag_run_id']} ({r['run_type']}): {r['state']}, ingest {ingest} ({note})")
    report(pipeline)
    return 0 if all(r["state"] == "success" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
