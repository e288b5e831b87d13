"""A small client of Airflow's public REST API v2: for terminal users (`microingest backfill`, `make demo`), and for
the `announce` task, which writes its run's note through it.

It logs in like any API user (`POST /auth/token`) and speaks JSON over HTTP only: it imports nothing of Airflow, so it
works against any deployment it can reach. Credentials come from the environment, the local platform's simple auth
manager file or an Airflow connection, never from the command line.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from microingest import settings
from microingest.errors import MicroingestError

FINISHED = ("success", "failed")


class AirflowApiError(MicroingestError):
    """The API refused a request (bad Params, unknown DAG, ...) or could not be reached. Whether another try may
    succeed is the answer's: unreachable, or a server error (5xx), is transient; a refusal (4xx) or missing
    credentials are the request's own."""

    def __init__(self, message: str, status: int | None = None, *, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable or (status is not None and status >= 500)


@dataclass
class DagRun:
    dag_id: str
    run_id: str
    state: str
    run_type: str = ""
    tasks: dict[str, str] = field(default_factory=dict)  # task_id -> state ("none" before it is scheduled)
    tries: dict[str, int] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED

    def describe(self) -> str:
        tasks = ", ".join(f"{t}={s}" for t, s in sorted(self.tasks.items()))
        return f"{self.run_id} {self.state}" + (f": {tasks}" if tasks else "")


def credentials() -> tuple[str, str]:
    """MICROINGEST_AIRFLOW_USERNAME/PASSWORD when set, else the local platform's admin."""
    user, password = os.environ.get("MICROINGEST_AIRFLOW_USERNAME"), os.environ.get("MICROINGEST_AIRFLOW_PASSWORD")
    if user and password:
        return user, password
    path = settings.state_dir() / "airflow" / "passwords.json"
    try:
        return next(iter(json.loads(path.read_text()).items()))
    except (OSError, ValueError, StopIteration):
        raise AirflowApiError(
            f"no Airflow credentials: set MICROINGEST_AIRFLOW_USERNAME and "
            f"MICROINGEST_AIRFLOW_PASSWORD, or run `make up` (which writes {path})"
        ) from None


def base_url() -> str:
    return os.environ.get("AIRFLOW__API__BASE_URL", "http://127.0.0.1:8080").rstrip("/")


class AirflowClient:
    def __init__(
        self, base: str | None = None, user: str | None = None, password: str | None = None, timeout: float = 30
    ):
        self.base = (base or base_url()).rstrip("/")
        self.timeout = timeout
        if user is None or password is None:
            user, password = credentials()
        self.token = self._request("POST", "/auth/token", {"username": user, "password": password}, auth=False)[
            "access_token"
        ]

    @classmethod
    def of_connection(cls, conn) -> AirflowClient:
        """From an Airflow connection (a ConnectionInfo): host (with or without http(s)://), port, login, password."""
        scheme = "https" if "https" in (conn.conn_type, conn.schema) else "http"
        base = conn.host if "://" in conn.host else f"{scheme}://{conn.host}"
        return cls(f"{base}:{conn.port}" if conn.port else base, conn.login, conn.password)

    def _request(self, method: str, path: str, body: dict | None = None, auth: bool = True) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if auth:
            req.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise AirflowApiError(f"{method} {path}: HTTP {exc.code}: {_detail(exc)}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise AirflowApiError(
                f"Airflow API at {self.base} unreachable ({reason}); is it running (`make up`)?", retryable=True
            ) from None

    def get(self, path: str, **query) -> dict:
        return self._request("GET", path + (f"?{urlencode(query, doseq=True)}" if query else ""))

    def post(self, path: str, body: dict) -> dict:
        return self._request("POST", path, body)

    def patch(self, path: str, body: dict) -> dict:
        return self._request("PATCH", path, body)

    # --- DAGs and runs -----------------------------------------------------------------------------------------

    def wait_for_dag(self, dag_id: str, timeout: float = 180, say: Callable[[str], None] = print) -> None:
        """Until the dag-processor has registered `dag_id` (a new declaration takes one parsing cycle). A DAG marked
        stale (its file gone at the last parse, or not yet parsed again) is listed but cannot be triggered: wait."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self.get(f"/api/v2/dags/{quote(dag_id)}").get("is_stale"):
                    return
                if time.monotonic() > deadline:
                    raise AirflowApiError(
                        f"DAG {dag_id} is still stale after {timeout:.0f} s: is its declaration "
                        "in the pipelines folder, and valid?"
                    )
            except AirflowApiError as exc:
                if exc.status != 404 or time.monotonic() > deadline:
                    raise
            say(f"waiting for the dag-processor to register {dag_id} ...")
            time.sleep(5)

    def unpause(self, dag_id: str) -> None:
        """Runs of a paused DAG are created but not scheduled; unpausing also lets its schedule start runs."""
        self.patch(f"/api/v2/dags/{quote(dag_id)}", {"is_paused": False})

    def trigger(self, dag_id: str, conf: dict | None = None, note: str | None = None) -> str:
        """A manual run with these Params; Airflow checks their types (HTTP 400 → AirflowApiError)."""
        body: dict[str, Any] = {"logical_date": None, "conf": conf or {}}
        if note:
            body["note"] = note
        return self.post(f"/api/v2/dags/{quote(dag_id)}/dagRuns", body)["dag_run_id"]

    def set_note(self, dag_id: str, run_id: str, note: str) -> None:
        self._request("PATCH", f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}?update_mask=note", {"note": note})

    def asset_events(self, dag_id: str, run_id: str) -> list[dict]:
        """The Asset events a DAG run emitted (its `announce` task's), each with the runs they made downstream."""
        return self.get("/api/v2/assets/events", source_dag_id=dag_id, source_run_id=run_id)["asset_events"]

    def wait_for_downstream(self, dag_id: str, run_id: str, timeout: float = 300, poll: float = 3) -> list[dict]:
        """The run's Asset events once the scheduler has made a downstream run of each (or `timeout` passed: the
        events as they are then, an event without `created_dagruns` telling that no DAG runs on its Asset)."""
        deadline = time.monotonic() + timeout
        while True:
            events = self.asset_events(dag_id, run_id)
            if all(e["created_dagruns"] for e in events) or time.monotonic() > deadline:
                return events
            time.sleep(poll)

    def note(self, dag_id: str, run_id: str) -> str | None:
        return self.get(f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}").get("note")

    def dag_run(self, dag_id: str, run_id: str) -> DagRun:
        path = f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}"
        run = self.get(path)
        tis = self.get(f"{path}/taskInstances")["task_instances"]
        return DagRun(
            dag_id,
            run_id,
            run["state"],
            run.get("run_type", ""),
            {t["task_id"]: t["state"] or "none" for t in tis},
            {t["task_id"]: t["try_number"] for t in tis},
        )

    def wait_for_run(
        self,
        dag_id: str,
        run_id: str,
        timeout: float = 1800,
        on_change: Callable[[DagRun], None] | None = None,
        poll: float = 3,
    ) -> DagRun:
        deadline, seen = time.monotonic() + timeout, None
        while True:
            run = self.dag_run(dag_id, run_id)
            if on_change and run.describe() != seen:
                on_change(run)
                seen = run.describe()
            if run.finished:
                return run
            if time.monotonic() > deadline:
                raise AirflowApiError(f"run {run_id} of {dag_id} not finished after {timeout:.0f}s ({run.describe()})")
            time.sleep(poll)

    def xcom(self, run: DagRun, task_id: str, key: str = "return_value"):
        """A task's XCom value, or None when the task pushed none."""
        try:
            entry = self.get(
                f"/api/v2/dags/{quote(run.dag_id)}/dagRuns/{quote(run.run_id)}/taskInstances/"
                f"{quote(task_id)}/xcomEntries/{quote(key)}"
            )
        except AirflowApiError as exc:
            if exc.status == 404:
                return None
            raise
        return entry.get("value")

    def log_events(self, run: DagRun, task_id: str, try_number: int | None = None) -> list[dict]:
        """A task try's structured log entries (each with at least `event`; errors with `level` 'error')."""
        try_number = try_number or run.tries.get(task_id) or 1
        logs = self.get(
            f"/api/v2/dags/{quote(run.dag_id)}/dagRuns/{quote(run.run_id)}/taskInstances/"
            f"{quote(task_id)}/logs/{try_number}",
            full_content="true",
        )
        content = logs.get("content", [])
        return [e if isinstance(e, dict) else {"event": str(e)} for e in content]


def _detail(exc: urllib.error.HTTPError) -> str:
    body = exc.read().decode(errors="replace")
    try:
        detail = json.loads(body).get("detail", body)
    except ValueError:
        return body.strip()[:500]
    return detail if isinstance(detail, str) else json.dumps(detail)
