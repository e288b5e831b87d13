"""What the soak reads of the running cluster topology, and how it kills its parts: service pids from the platform's
run folder, health as each service reports it, where Airflow and Spark are working right now."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import datetime
from pathlib import Path

from kafka import KafkaAdminClient

from local_platform import config, postgres, process_tree, spark_cluster, supervisord
from local_platform import kafka as local_kafka
from microingest import settings

RUN = settings.state_dir() / "run"
SERVICES = Path(__file__).resolve().parents[2] / "services.py"
EDGE_WORKERS = ("edge-worker-1", "edge-worker-2")
SPARK_WORKERS = ("spark-worker-1", "spark-worker-2")


def platform(*args: str, timeout: float = 600) -> None:
    """Control the platform as an operator would (`services.py stop postgres`, ...)."""
    subprocess.run([sys.executable, str(SERVICES), *args], check=True, capture_output=True, timeout=timeout)


def pid(service: str) -> int | None:
    try:
        value = int((RUN / f"{service}.pid").read_text())
        os.kill(value, 0)
        return value
    except (OSError, ValueError):
        return None


def kill9(service: str, wait: float = 180) -> int:
    """kill -9 of the service's main process (supervisord starts it again, after the rest of its tree is ended); when
    it is being restarted after an earlier fault, once it runs again."""
    deadline = time.monotonic() + wait
    while (victim := pid(service)) is None and time.monotonic() < deadline:
        time.sleep(1)
    if victim is None:
        raise RuntimeError(f"{service} not running for {wait:.0f}s")
    os.kill(victim, signal.SIGKILL)
    return victim


def restarted(service: str, old_pid: int) -> bool:
    current = pid(service)
    return current is not None and current != old_pid


def service_cgroup(service: str) -> Path | None:
    return process_tree.service_cgroup(RUN, service)


def _get(url: str, timeout: float = 5):
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read() or b"null")


def listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def api_healthy() -> bool:
    try:
        health = _get(f"http://127.0.0.1:{config.AIRFLOW_PORT}/api/v2/monitor/health")
    except OSError:
        return False
    return health.get("metadatabase", {}).get("status") == "healthy"


def airflow_healthy(since: float | None = None) -> bool:
    """Airflow's own health report: its metadata database and every component's heartbeat are healthy, and, given
    `since` (a Unix time), each component heartbeat after it. Just after a database outage the report still shows
    the heartbeats from before it, of components that may yet exit on its errors (and be restarted)."""
    try:
        health = _get(f"http://127.0.0.1:{config.AIRFLOW_PORT}/api/v2/monitor/health")
    except (OSError, ValueError):  # the API server itself still reconnecting
        return False
    if (health.get("metadatabase") or {}).get("status") != "healthy":
        return False
    for part in ("scheduler", "triggerer", "dag_processor"):
        report = health.get(part) or {}
        if report.get("status") != "healthy":
            return False
        beat = report.get(f"latest_{part}_heartbeat")
        if since is not None and (not beat or datetime.fromisoformat(beat).timestamp() <= since):
            return False
    return True


def scheduler_healthy() -> bool:
    try:
        _get(f"http://127.0.0.1:{config.SCHEDULER_HEALTH_PORT}/health")
        return True
    except (OSError, ValueError):
        return False


def edge_worker_states(api) -> dict[str, str]:
    """Each Edge worker's state as the API server sees it (idle, running, unknown, ...)."""
    workers = api.get("/edge_worker/ui/worker").get("workers", [])
    return {w["worker_name"]: w["state"] for w in workers}


def task_instances(api, state: str) -> list[dict]:
    """Task instances in this state across every DAG, with the worker (hostname) that runs them."""
    return api.get("/api/v2/dags/~/dagRuns/~/taskInstances", state=state, limit=100)["task_instances"]


def alive_spark_workers() -> int:
    try:
        return len(spark_cluster.alive_workers())
    except OSError:
        return 0


def connect_app_url() -> str | None:
    base = f"http://127.0.0.1:{config.SPARK_CONNECT_UI_PORT}/api/v1/applications"
    try:
        apps = _get(base)
    except OSError:
        return None
    return f"{base}/{apps[0]['id']}" if apps else None


def active_stages() -> int:
    """Stages running now: on the Connect server's application, and the spark-submit applications the master has."""
    running = 0
    app = connect_app_url()
    if app:
        try:
            running += len(_get(f"{app}/stages?status=active"))
        except OSError:
            pass
    try:
        running += sum(
            1 for a in spark_cluster.master_state()["activeapps"] if a["name"] != "microingest-spark-connect"
        )
    except OSError:
        pass
    return running


def service_states() -> dict:
    """What a stalled soak reports of the platform: each service's state, and what Spark's master has given whom."""
    found: dict = {"services": supervisord.states()}
    try:
        master = spark_cluster.master_state()
        found["spark_workers"] = [[w["host"], w["state"], w["cores"], w["coresused"]] for w in master["workers"]]
        found["spark_apps"] = [[a["id"], a["name"], a["state"], a["cores"]] for a in master["activeapps"]]
    except (OSError, KeyError) as exc:
        found["spark_master"] = repr(exc)
    return found


def spark_submit_drivers() -> list[int]:
    """The JVMs of spark-submit applications running the ingest job (drivers in client mode, on the Edge workers)."""
    job = str(settings.spark_job_path()).encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"org.apache.spark.deploy.SparkSubmit" in cmdline and job in cmdline:
                found.append(int(entry))
    return found


def postmaster_pid() -> int:
    return int((postgres.data_dir() / "postmaster.pid").read_text().split()[0])


def broker_service(node_id: int) -> str:
    return local_kafka.name(node_id)


def partition_leaders(kafka: dict, topic: str) -> dict[int, int]:
    admin = KafkaAdminClient(**kafka)
    try:
        return {p["partition_index"]: p["leader_id"] for p in admin.describe_topics([topic])[0]["partitions"]}
    finally:
        admin.close()


def fully_replicated(kafka: dict, topic: str) -> bool:
    """Every partition of the topic led and with all three replicas in sync."""
    try:
        admin = KafkaAdminClient(**kafka, request_timeout_ms=5000)
    except Exception:
        return False
    try:
        partitions = admin.describe_topics([topic])[0]["partitions"]
        return all(p["leader_id"] >= 0 and len(p["isr_nodes"]) == 3 for p in partitions)
    except Exception:
        return False
    finally:
        admin.close()
