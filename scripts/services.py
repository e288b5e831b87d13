"""Local platform: Postgres, a Kafka KRaft broker and Airflow as processes on loopback (`make up/down/status`).

Configured connections win: if AIRFLOW_CONN_MICROINGEST_POSTGRES or AIRFLOW_CONN_MICROINGEST_KAFKA is set and
reachable, that server is used and no local one is started. Everything local lives in the state folder
($MICROINGEST_STATE, default .state/): data, logs, pid files, and platform.env, the settings `make up` used, which
scripts can `source`.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("MICROINGEST_STATE", REPO / ".state"))
VENV_BIN = Path(sys.executable).parent
ENV_FILE = STATE / "platform.env"
PG_PORT = int(os.environ.get("MICROINGEST_PG_PORT", "55432"))
KAFKA_PORT = int(os.environ.get("MICROINGEST_KAFKA_PORT", "9092"))
CONTROLLER_PORT = int(os.environ.get("MICROINGEST_KAFKA_CONTROLLER_PORT", "9093"))
KAFKA_SASL_PORT = int(os.environ.get("MICROINGEST_KAFKA_SASL_PORT", "9094"))
AIRFLOW_PORT = int(os.environ.get("MICROINGEST_AIRFLOW_PORT", "8080"))
AIRFLOW_SERVICES = ("api-server", "scheduler", "dag-processor", "triggerer")

sys.path.insert(0, str(REPO / "src"))
from microingest.connections import (  # noqa: E402
    env_name, get_connection, kafka_python_config, parse_connection, postgres_params, to_env_value)

PG_CONN, KAFKA_CONN, SPARK_CONN = "microingest_postgres", "microingest_kafka", "microingest_spark"


def say(msg: str) -> None:
    print(f"[platform] {msg}", flush=True)


# --- processes ------------------------------------------------------------------------------------------------

def pid_file(name: str) -> Path:
    return STATE / "run" / f"{name}.pid"


def running_pid(name: str) -> int | None:
    try:
        pid = int(pid_file(name).read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str]) -> int:
    pid = running_pid(name)
    if pid:
        say(f"{name} already running (pid {pid})")
        return pid
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=REPO, start_new_session=True)
    pid_file(name).write_text(str(proc.pid))
    say(f"started {name} (pid {proc.pid}, log {log})")
    return proc.pid


def stop(name: str, timeout: float = 30) -> None:
    pid = running_pid(name)
    if not pid:
        pid_file(name).unlink(missing_ok=True)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.time() + timeout
    while time.time() < deadline and running_pid(name):
        time.sleep(0.3)
    if running_pid(name):
        os.killpg(pid, signal.SIGKILL)
    pid_file(name).unlink(missing_ok=True)
    say(f"stopped {name}")


def wait_for(what: str, check, timeout: float, log: Path | None = None) -> None:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # the service is still starting; remember why for the final message
            last = exc
        time.sleep(1)
    tail = ""
    if log and log.exists():
        tail = "\n  ".join(log.read_text(errors="replace").splitlines()[-25:])
        tail = f"\n  last lines of {log}:\n  {tail}"
    raise SystemExit(f"[platform] {what} did not come up within {timeout:.0f}s ({last!r}){tail}")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, port)) == 0


# --- postgres -------------------------------------------------------------------------------------------------

def pg_reachable(params: dict) -> bool:
    import psycopg2

    try:
        psycopg2.connect(**{**params, "connect_timeout": 3}).close()
        return True
    except psycopg2.OperationalError:
        return False


def pg_bindir() -> Path:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), reverse=True)
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    if candidates:
        return candidates[0].parent
    raise SystemExit("[platform] no PostgreSQL server binaries found; `make install` installs Debian's postgresql")


def as_pg_user(argv: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root; run them as the 'postgres' system user in that case.
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else argv


def grant_traverse(path: Path) -> None:
    """Let the postgres user reach the state folder: add o+x (traverse only, no listing) to ancestors lacking it."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            os.chmod(parent, mode | 0o001)
            say(f"granted traverse permission (o+x) on {parent} so the postgres user can reach its data")


def start_local_postgres() -> dict:
    root = STATE / "postgres"
    data, sockets, log = root / "data", root / "run", root / "postgres.log"
    password_file = root / "password"
    bindir = pg_bindir()
    root.mkdir(parents=True, exist_ok=True)
    if not password_file.exists():
        password_file.write_text(secrets.token_urlsafe(18))
        password_file.chmod(0o600)
    password = password_file.read_text().strip()
    params = {"host": "127.0.0.1", "port": PG_PORT, "user": "microingest", "password": password, "dbname": "microingest"}
    if os.geteuid() == 0:
        grant_traverse(root)
        sockets.mkdir(exist_ok=True)
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    if not (data / "PG_VERSION").exists():
        say(f"initdb {data}")
        pwfile = root / "initdb.pw"
        pwfile.write_text(password)
        if os.geteuid() == 0:
            shutil.chown(pwfile, "postgres")
        subprocess.run(as_pg_user([str(bindir / "initdb"), "-D", str(data), "-U", "microingest", f"--pwfile={pwfile}",
                                   "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8",
                                   "--locale=C"]), check=True, stdout=subprocess.DEVNULL)
        pwfile.unlink()
    admin = {**params, "dbname": "postgres"}
    if not pg_reachable(admin):
        opts = f"-c listen_addresses=127.0.0.1 -p {PG_PORT} -c unix_socket_directories={sockets} -c max_connections=200"
        subprocess.run(as_pg_user([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t",
                                   "60", "start"]), check=True, stdout=subprocess.DEVNULL)
        say(f"started Postgres {bindir.parent.name} on 127.0.0.1:{PG_PORT} (data {data}, log {log})")
    wait_for("Postgres", lambda: pg_reachable(admin), 60, log)
    ensure_database(admin, params["dbname"])
    return params


def stop_local_postgres() -> None:
    data = STATE / "postgres" / "data"
    if (data / "postmaster.pid").exists():
        subprocess.run(as_pg_user([str(pg_bindir() / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                       check=False, stdout=subprocess.DEVNULL)
        say("stopped Postgres")


def ensure_database(params: dict, name: str) -> None:
    import psycopg2

    conn = psycopg2.connect(**params)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
        if not cur.fetchone():
            cur.execute(f'CREATE DATABASE "{name}"')
            say(f"created database {name}")
    conn.close()


# --- kafka ----------------------------------------------------------------------------------------------------

def kafka_reachable(config: dict) -> bool:
    from kafka import KafkaConsumer

    try:
        KafkaConsumer(**config, bootstrap_timeout_ms=3000, request_timeout_ms=5000).close()
        return True
    except Exception:
        return False


def start_local_kafka() -> dict:
    root = STATE / "kafka"
    libs, data, log = root / "libs", root / "data", root / "broker.log"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise SystemExit(f"[platform] no Kafka broker jars in {libs}; run `make install`")
    sasl_file = root / "sasl.json"  # a SASL/PLAIN listener too, so authenticated clients are tested for real
    if not sasl_file.exists():
        sasl_file.write_text(json.dumps({"bootstrap.servers": f"127.0.0.1:{KAFKA_SASL_PORT}", "username": "ingest",
                                         "password": secrets.token_urlsafe(18)}))
        sasl_file.chmod(0o600)
    sasl = json.loads(sasl_file.read_text())
    props = root / "server.properties"
    props.write_text("\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{CONTROLLER_PORT}",
        f"listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},CONTROLLER://127.0.0.1:{CONTROLLER_PORT},"
        f"SASL_PLAINTEXT://127.0.0.1:{KAFKA_SASL_PORT}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},SASL_PLAINTEXT://127.0.0.1:{KAFKA_SASL_PORT}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
        f'required user_{sasl["username"]}="{sasl["password"]}";',
        f"log.dirs={data}",
        "num.partitions=3",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "log.cleaner.backoff.ms=1000",  # compacted-topic tests need the cleaner to come round quickly
        "auto.create.topics.enable=false",
    ]) + "\n")
    log4j = root / "log4j2.properties"
    log4j.write_text("\n".join([
        "rootLogger.level=INFO", "rootLogger.appenderRef.out.ref=out",
        "appender.out.type=Console", "appender.out.name=out",
        "appender.out.layout.type=PatternLayout", "appender.out.layout.pattern=[%d] %p %m (%c)%n",
        "logger.kafka.name=kafka", "logger.kafka.level=WARN",
        "logger.apache.name=org.apache.kafka", "logger.apache.level=WARN",
    ]) + "\n")
    java = [shutil.which("java") or "java", "-Xms256m", "-Xmx768m", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", f"{libs}/*"]
    if not (data / "meta.properties").exists():
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        say(f"formatting KRaft storage {data} (cluster {cluster_id})")
        subprocess.run([*java, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
                       check=True, stdout=subprocess.DEVNULL)
    config = {"bootstrap_servers": [f"127.0.0.1:{KAFKA_PORT}"]}
    if not kafka_reachable(config):
        spawn("kafka", [*java, "kafka.Kafka", str(props)], log, dict(os.environ))
    wait_for("Kafka", lambda: kafka_reachable(config), 120, log)
    return config


# --- airflow --------------------------------------------------------------------------------------------------

def airflow_env(pg: dict) -> dict[str, str]:
    home = STATE / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    secrets_file = home / "secrets.json"
    if not secrets_file.exists():
        secrets_file.write_text(json.dumps({"jwt": secrets.token_urlsafe(32), "api": secrets.token_urlsafe(32),
                                            "fernet": base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()}))
        secrets_file.chmod(0o600)
    keys = json.loads(secrets_file.read_text())
    passwords = home / "simple_auth_manager_passwords.json"
    if not passwords.exists():
        passwords.write_text(json.dumps({"admin": secrets.token_urlsafe(12)}))
        passwords.chmod(0o600)
    from sqlalchemy.engine import URL

    db_url = URL.create("postgresql+psycopg2", username=pg.get("user"), password=pg.get("password"),
                        host=pg["host"], port=pg["port"], database="airflow").render_as_string(hide_password=False)
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__FERNET_KEY": keys["fernet"],
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
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
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
    }


def airflow_api_healthy() -> bool:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{AIRFLOW_PORT}/api/v2/monitor/health", timeout=5) as r:
        return r.status == 200


def start_airflow(env: dict[str, str]) -> None:
    """Start Airflow's services with the platform's settings; restart running ones whose settings changed (the test
    suite serves its own pipelines folder, `make up` the repository's)."""
    logs = STATE / "airflow" / "logs"
    marker = STATE / "run" / "airflow-settings.sha256"
    fingerprint = hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()
    running = [s for s in AIRFLOW_SERVICES if running_pid(f"airflow-{s}")]
    if running and (not marker.exists() or marker.read_text() != fingerprint):
        say(f"Airflow's settings changed (pipelines folder {env['MICROINGEST_PIPELINES_DIR']}); restarting it")
        for service in reversed(AIRFLOW_SERVICES):
            stop(f"airflow-{service}")
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(fingerprint)
    for service in AIRFLOW_SERVICES:
        spawn(f"airflow-{service}", [str(VENV_BIN / "airflow"), service], logs / f"{service}.log",
              {**os.environ, **env})
    wait_for("Airflow API server", airflow_api_healthy, 240, logs / "api-server.log")


# --- commands -------------------------------------------------------------------------------------------------

def configured(conn_id: str):
    value = os.environ.get(env_name(conn_id))
    return parse_connection(conn_id, value) if value else None


def write_env(env: dict[str, str]) -> None:
    ENV_FILE.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Written by `make up`: the settings the platform runs with. Contains credentials; keep it private."]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    ENV_FILE.write_text("\n".join(lines) + "\n")
    ENV_FILE.chmod(0o600)


def up(with_airflow_services: bool, pipelines_dir: Path) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    pg_conn = configured(PG_CONN)
    if pg_conn and pg_reachable(postgres_params(pg_conn)):
        say(f"using the configured Postgres at {pg_conn.host}:{pg_conn.port}")
        pg = postgres_params(pg_conn)
    else:
        if pg_conn:
            say(f"configured Postgres at {pg_conn.host}:{pg_conn.port} is unreachable; starting a local cluster")
        pg = start_local_postgres()
        pg_conn = parse_connection(PG_CONN, json.dumps({"conn_type": "postgres", "host": pg["host"], "port": pg["port"],
                                                        "login": pg["user"], "password": pg["password"],
                                                        "schema": pg["dbname"]}))
    kafka_conn = configured(KAFKA_CONN)
    if kafka_conn and kafka_reachable(kafka_python_config(kafka_conn)):
        say(f"using the configured Kafka at {kafka_python_config(kafka_conn)['bootstrap_servers']}")
    else:
        if kafka_conn:
            say("configured Kafka is unreachable; starting a local broker")
        config = start_local_kafka()
        kafka_conn = parse_connection(KAFKA_CONN, json.dumps(
            {"conn_type": "kafka", "extra": {"bootstrap.servers": ",".join(config["bootstrap_servers"])}}))
    spark_value = os.environ.get(env_name(SPARK_CONN)) or json.dumps({"conn_type": "spark", "host": "local[*]"})

    env = {
        "MICROINGEST_HOME": str(REPO),
        "MICROINGEST_STATE": str(STATE),
        "MICROINGEST_PIPELINES_DIR": str(pipelines_dir),
        "PATH": f"{VENV_BIN}:{os.environ.get('PATH', '')}",
        env_name(PG_CONN): to_env_value(pg_conn),
        env_name(KAFKA_CONN): to_env_value(kafka_conn),
        env_name(SPARK_CONN): spark_value,
        **airflow_env(pg),
    }
    write_env(env)
    os.environ.update(env)

    from microingest.migrations import migrate

    applied = migrate(postgres_params(get_connection(PG_CONN)))
    say(f"schema up to date ({len(applied)} migration(s) applied now)")
    ensure_database({**pg, "dbname": "postgres"}, "airflow")
    say("airflow db migrate (first run takes a minute)")
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env={**os.environ, **env}, check=True,
                   stdout=subprocess.DEVNULL)
    if with_airflow_services:
        pipelines_dir.mkdir(parents=True, exist_ok=True)
        start_airflow(env)
    status()


def down() -> None:
    for service in reversed(AIRFLOW_SERVICES):
        stop(f"airflow-{service}")
    stop("kafka")
    stop_local_postgres()


def airflow_login() -> str:
    path = STATE / "airflow" / "simple_auth_manager_passwords.json"
    if not path.exists():
        return "(not set up yet)"
    user, password = next(iter(json.loads(path.read_text()).items()))
    return f"user {user}, password {password} (from {path})"


def status() -> None:
    rows = []
    pg_pid_file = STATE / "postgres" / "data" / "postmaster.pid"
    pg_pid = pg_pid_file.read_text().split()[0] if pg_pid_file.exists() else "-"
    rows.append(("postgres", f"127.0.0.1:{PG_PORT}", pg_pid, STATE / "postgres" / "postgres.log"))
    rows.append(("kafka", f"127.0.0.1:{KAFKA_PORT}", running_pid("kafka") or "-", STATE / "kafka" / "broker.log"))
    for service in AIRFLOW_SERVICES:
        port = f"127.0.0.1:{AIRFLOW_PORT}" if service == "api-server" else ""
        rows.append((f"airflow {service}", port, running_pid(f"airflow-{service}") or "-",
                     STATE / "airflow" / "logs" / f"{service}.log"))
    print(f"{'service':<22} {'address':<17} {'pid':<8} log")
    for name, addr, pid, log in rows:
        print(f"{name:<22} {addr:<17} {str(pid):<8} {log}")
    print(f"Airflow UI: http://127.0.0.1:{AIRFLOW_PORT}  login: {airflow_login()}")
    print(f"Connection settings: source {ENV_FILE}")


def control(action: str, service: str) -> None:
    """Stop, start or restart one local service (the chaos tests break them on purpose)."""
    if service == "kafka":
        if action in ("stop", "restart"):
            stop("kafka")
        if action in ("start", "restart"):
            start_local_kafka()
    elif service == "postgres":
        data = STATE / "postgres" / "data"
        if not (data / "PG_VERSION").exists():
            raise SystemExit("[platform] Postgres is not a local cluster of this platform; not touching it")
        pg_ctl = [str(pg_bindir() / "pg_ctl"), "-D", str(data), "-w", "-t", "60"]
        if action == "stop":
            stop_local_postgres()
        elif action == "restart":
            subprocess.run(as_pg_user([*pg_ctl, "-m", "fast", "restart"]), check=True, stdout=subprocess.DEVNULL)
            say("restarted Postgres")
        else:
            start_local_postgres()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up_cmd = sub.add_parser("up", help="start what is not running, apply migrations, write platform.env")
    up_cmd.add_argument("--no-airflow-services", action="store_true",
                        help="prepare Airflow's database but start no Airflow process")
    up_cmd.add_argument("--pipelines-dir", type=Path,
                        default=Path(os.environ.get("MICROINGEST_PIPELINES_DIR", REPO / "pipelines")),
                        help="the declarations Airflow serves (default: $MICROINGEST_PIPELINES_DIR or pipelines/)")
    sub.add_parser("down", help="stop everything started by `up`")
    sub.add_parser("status", help="what runs where")
    for action in ("stop", "start", "restart"):
        cmd = sub.add_parser(action, help=f"{action} one local service")
        cmd.add_argument("service", choices=("kafka", "postgres"))
    args = parser.parse_args()
    if args.command == "up":
        up(not args.no_airflow_services, args.pipelines_dir.resolve())
    elif args.command == "down":
        down()
    elif args.command in ("stop", "start", "restart"):
        control(args.command, args.service)
    else:
        status()


if __name__ == "__main__":
    main()
