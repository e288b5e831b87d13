"""Airflow's services for the local platform: api-server, scheduler, dag-processor and triggerer, on the
platform's Postgres, with an admin whose generated password stays in the state folder. The single topology keeps its
users in Airflow's simple auth manager, the development one; the cluster runs FAB's, as a deployment does
(docker-compose.yml), its users and the run-notes role made after each migration.

Two more credentials live there: the `microingest` user, allowed to edit DAG runs, through which the `announce` task
writes run notes (connection microingest_airflow), and the read-only token that scrapes /microingest/metrics
(connection microingest_metrics)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from local_platform.config import (
    AIRFLOW_PORT,
    AIRFLOW_WORKERS,
    CLUSTER,
    REPO,
    SCHEDULER_HEALTH_PORT,
    STATE,
    VENV_BIN,
    private_file,
)
from local_platform.processes import running_pid, say, spawn, stop, wait_for
from microingest.spark import job_forks

SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")
NOTES_USER = "microingest"
# FAB's roles of the platform's own users: the run-notes user may edit runs (a note) and not trigger them.
FAB_ROLES = {"admin": "Admin", NOTES_USER: "Run notes"}
ROLES_FILE = REPO / "deploy" / "airflow-roles.json"
SIMPLE_AUTH_MANAGER = "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
FAB_AUTH_MANAGER = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
EDGE_EXECUTOR = "airflow.providers.edge3.executors.EdgeExecutor"
EDGE_WORKER_SLOTS = 4
# Tasks running at once across the platform: on the cluster, every slot of its Edge workers. Fewer would let a few
# long tasks (or those of a killed worker, until their heartbeat times out) hold every slot while the other DAGs'
# tasks queue behind them however many workers are idle.
PARALLELISM = EDGE_WORKER_SLOTS * AIRFLOW_WORKERS if CLUSTER else 4


def services() -> tuple[str, ...]:
    """Airflow's processes in this topology: with the Edge executor, its workers too."""
    return SERVICES + tuple(f"edge-worker-{n}" for n in range(1, AIRFLOW_WORKERS + 1))


def argv(service: str) -> list[str]:
    if service.startswith("edge-worker-"):
        return [
            str(VENV_BIN / "airflow"),
            "edge",
            "worker",
            "--edge-hostname",
            service,
            "--concurrency",
            str(EDGE_WORKER_SLOTS),
            "--pid",
            str(STATE / "run" / f"{service}.edge.pid"),
        ]
    return [str(VENV_BIN / "airflow"), service]


def executor_env() -> dict[str, str]:
    """The cluster runs tasks on Edge workers: they ask the API server for work over HTTP, so there is no broker to
    run or lose, and a restarted scheduler adopts the jobs they still run. A task whose worker died is failed (and
    retried) once it has sent no heartbeat for TASK_INSTANCE_HEARTBEAT_TIMEOUT."""
    if not CLUSTER:
        return {"AIRFLOW__CORE__EXECUTOR": "LocalExecutor"}
    return {
        "AIRFLOW__CORE__EXECUTOR": EDGE_EXECUTOR,
        "AIRFLOW__DATABASE__EXTERNAL_DB_MANAGERS": "airflow.providers.edge3.models.db.EdgeDBManager",
        "AIRFLOW__EDGE__API_ENABLED": "True",
        "AIRFLOW__EDGE__API_URL": f"http://127.0.0.1:{AIRFLOW_PORT}/edge_worker/v1/rpcapi",
        "AIRFLOW__EDGE__JOB_POLL_INTERVAL": "1",
        # A worker restarted under its name is refused until the old one missed 5 heartbeats.
        "AIRFLOW__EDGE__HEARTBEAT_INTERVAL": "5",
        # Long enough to ride out an API server restart (its tasks cannot report meanwhile), short enough that the
        # task of a worker killed outright is retried within two minutes (Airflow's default: 5).
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "90",
        # A job its worker claimed and died before starting stays queued (no heartbeat to miss): the scheduler takes
        # it back and queues it again once it has been queued this long (default 10 min). Twice; the third time fails
        # the task, so it stays well above how long a task waits for a slot while both workers live.
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "180",
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "30",
    }


def airflow_env(pg: dict) -> dict[str, str]:
    home = STATE / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    secrets_file = home / "secrets.json"
    if not secrets_file.exists():
        private_file(
            secrets_file,
            json.dumps(
                {
                    "jwt": secrets.token_urlsafe(32),
                    "api": secrets.token_urlsafe(32),
                    "fernet": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
                }
            ),
        )
    keys = json.loads(secrets_file.read_text())
    if "metrics" not in keys:  # a state folder from before the metrics endpoint
        keys["metrics"] = secrets.token_urlsafe(32)
        private_file(secrets_file, json.dumps(keys))
    passwords_file = home / "passwords.json"
    legacy = home / "simple_auth_manager_passwords.json"  # a state folder from before the cluster ran FAB
    if legacy.exists() and not passwords_file.exists():
        legacy.rename(passwords_file)
    # The admin first: it is who `make demo` and the tests log in as (microingest.systems.airflow_api.credentials).
    passwords = json.loads(passwords_file.read_text()) if passwords_file.exists() else {}
    passwords.setdefault("admin", secrets.token_urlsafe(12))
    passwords.setdefault(NOTES_USER, secrets.token_urlsafe(24))
    private_file(passwords_file, json.dumps(passwords))
    from sqlalchemy.engine import URL

    db_url = URL.create(
        "postgresql+psycopg2",
        username=pg.get("user"),
        password=pg.get("password"),
        host=pg["host"],
        port=pg["port"],
        database="airflow",
    ).render_as_string(hide_password=False)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        **executor_env(),
        "AIRFLOW__CORE__PARALLELISM": str(PARALLELISM),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__FERNET_KEY": keys["fernet"],
        **auth_env(passwords_file),
        "AIRFLOW_CONN_MICROINGEST_AIRFLOW": json.dumps(
            {
                "conn_type": "http",
                "host": "127.0.0.1",
                "port": AIRFLOW_PORT,
                "login": NOTES_USER,
                "password": passwords[NOTES_USER],
            }
        ),
        "AIRFLOW_CONN_MICROINGEST_METRICS": json.dumps({"conn_type": "generic", "password": keys["metrics"]}),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{AIRFLOW_PORT}/execution/",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db_url,
        "AIRFLOW__API__PORT": str(AIRFLOW_PORT),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{AIRFLOW_PORT}",
        "AIRFLOW__API__SECRET_KEY": keys["api"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "20",
        # The pipelines DAG file builds one DAG per YAML declaration, and a new or edited declaration does not touch
        # the file: re-parse it often enough that a new pipeline appears within seconds (a parse takes ~0.3 s).
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST": "127.0.0.1",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(SCHEDULER_HEALTH_PORT),
        # An idle scheduler sleeps this long between loops: a triggered run waits for it before it starts, and each
        # task for the loop after its upstream finished (default 1 s, i.e. about 1 s of a small run's latency).
        "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.25",
        # A scheduler watches the heartbeats and queue times only of the tasks it queued itself; a restarted one takes
        # over its predecessor's when it next looks for orphans (default every 5 min, which a task whose worker died
        # meanwhile waits out as running).
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        # OpenLineage events of every task and DAG run, one JSON per line; point the transport at a lineage server
        # (e.g. {"type": "http", "url": ...}) to send them there instead.
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "microingest",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "append": True, "log_file_path": str(lineage_file())}
        ),
    }


def auth_env(passwords_file: Path) -> dict[str, str]:
    if CLUSTER:
        return {"AIRFLOW__CORE__AUTH_MANAGER": FAB_AUTH_MANAGER}
    return {
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"admin:admin,{NOTES_USER}:user",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file),
    }


def make_users(env: dict[str, str]) -> None:
    """FAB keeps its users in Airflow's database: after a migration, the run-notes role and the platform's users
    (`roles import` skips a role that exists, `users create` a user), each password on standard input. About 25 s:
    each command starts all of Airflow."""
    if env["AIRFLOW__CORE__AUTH_MANAGER"] != FAB_AUTH_MANAGER:
        return
    say(f"Airflow's users (FAB): role {FAB_ROLES[NOTES_USER]!r} from {ROLES_FILE.name}, users {', '.join(FAB_ROLES)}")
    passwords = json.loads((STATE / "airflow" / "passwords.json").read_text())

    def airflow_cli(*args: str, typed: str | None = None) -> None:
        done = subprocess.run(
            [str(VENV_BIN / "airflow"), *args], env={**os.environ, **env}, input=typed, capture_output=True, text=True
        )
        if done.returncode:  # the password went to its standard input, never to what it prints
            raise SystemExit(f"airflow {' '.join(args[:2])} failed: {(done.stdout + done.stderr)[-2000:]}")

    airflow_cli("roles", "import", str(ROLES_FILE))
    for user, role in FAB_ROLES.items():
        names = ["--firstname", user, "--lastname", "microingest", "--email", f"{user}@microingest.invalid"]
        airflow_cli("users", "create", "--username", user, "--role", role, *names, typed=f"{passwords[user]}\n" * 2)


def lineage_file() -> Path:
    path = STATE / "openlineage" / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def api_healthy() -> bool:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{AIRFLOW_PORT}/api/v2/monitor/health", timeout=5) as r:
        return r.status == 200


def start(env: dict[str, str]) -> None:
    """Start Airflow's services with the platform's settings; restart running ones whose settings changed (the test
    suite serves its own pipelines folder, `make up` the repository's) or which run older code of microingest: every
    task forks from a process that imported the plugin, and would mix its modules with those on disk."""
    logs = STATE / "airflow" / "logs"
    marker = STATE / "run" / "airflow-settings.sha256"
    started_with = json.dumps([sorted(env.items()), job_forks.fingerprint()])
    fingerprint = hashlib.sha256(started_with.encode()).hexdigest()
    running = [s for s in services() if running_pid(f"airflow-{s}")]
    if running and (not marker.exists() or marker.read_text() != fingerprint):
        say(
            f"Airflow's settings (pipelines folder {env['MICROINGEST_PIPELINES_DIR']}) or microingest's code changed; "
            "restarting it"
        )
        stop_all()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)
    for service in services():
        spawn(f"airflow-{service}", argv(service), logs / f"{service}.log", {**os.environ, **env})
    wait_for("Airflow API server", api_healthy, 240, logs / "api-server.log")


def stop_all() -> None:
    # The Edge workers first, while the API server they report to still answers (without it each waits out its
    # calls' timeouts, 30 s); then the rest at once (the triggerer alone takes about 10 s to let its triggers go).
    names = [f"airflow-{service}" for service in services()]
    workers = [n for n in names if n.startswith("airflow-edge-worker-")]
    for wave in (workers, [n for n in names if n not in workers]):
        if wave:
            with ThreadPoolExecutor(len(wave)) as pool:
                list(pool.map(stop, wave))


def login(show_password: bool) -> str:
    path = STATE / "airflow" / "passwords.json"
    if not path.exists():
        return "(not set up yet)"
    user, password = next(iter(json.loads(path.read_text()).items()))
    if not show_password:
        return f"user {user}, password in {path} (`make status` shows it)"
    return f"user {user}, password {password} (from {path})"
