"""Local platform: Postgres, Kafka (KRaft), Spark and Airflow as processes on loopback (`make up/down/status`), in
the single topology (one process of each) or the cluster one (MICROINGEST_TOPOLOGY=cluster, see local_platform.config).
Each service runs under supervisord, which restarts it when it dies, in a cgroup that holds every process it starts.

Configured connections win: if AIRFLOW_CONN_MICROINGEST_POSTGRES, _KAFKA or _SCHEMA_REGISTRY is set, that
server is used and no local one is started; if it is unreachable, `up` fails rather than quietly writing to a
throw-away local server. Everything local lives in the state folder ($MICROINGEST_STATE, default .state/): data,
logs, pid files, and platform.env, the settings `make up` used, which scripts can `source`.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from local_platform import airflow, job_forks, kafka, postgres, schema_registry, spark_cluster, spark_connect
from local_platform.config import (
    AIRFLOW_PORT,
    CLUSTER,
    ENV_FILE,
    INSTALLED,
    PG_PORT,
    REPO,
    SCHEMA_REGISTRY_PORT,
    SPARK_CONNECT_PORT,
    SPARK_MASTER_PORT,
    SPARK_MASTER_UI_PORT,
    SPARK_SCRATCH,
    SPARK_WORKERS,
    STATE,
    TOPOLOGY,
    VENV_BIN,
    private_file,
    spark_submit_opts,
)
from local_platform.processes import leftovers, say, shown_state, sweep
from microingest import settings
from microingest.commit.target_tables import prepare_targets
from microingest.declare.files import load_declarations
from microingest.errors import Refused
from microingest.spark.connect import PLATFORM_CONN_ID
from microingest.spark.submit import SUBMIT_CONN_ID
from microingest.systems.connections import (
    env_name,
    get_connection,
    kafka_python_config,
    parse_connection,
    postgres_params,
    schema_registry_config,
    to_env_value,
)
from microingest.systems.migrations import migrate
from microingest.systems.schema_registry import shown_url

PG_CONN, KAFKA_CONN = "microingest_postgres", "microingest_kafka"
SPARK_CONNECT_CONN = PLATFORM_CONN_ID  # the long-lived driver: a pipeline's Spark connection unless it names another
SPARK_SUBMIT_CONN = SUBMIT_CONN_ID  # a Spark application per run, for the pipelines that name it
REGISTRY_CONN = "microingest_schema_registry"


def configured(conn_id: str):
    """The connection set in the environment for a server of someone else's; None when unset, or when it is the one
    this platform wrote into platform.env for its own server (a shell that sourced the file names our servers)."""
    value = os.environ.get(env_name(conn_id))
    if not value or value == written_env().get(env_name(conn_id)):
        return None
    return parse_connection(conn_id, value)


def written_env() -> dict[str, str]:
    """The settings the last `up` wrote into platform.env."""
    if not ENV_FILE.exists():
        return {}
    found = {}
    for line in ENV_FILE.read_text().splitlines():
        if line.startswith("export "):
            name, _, value = line[len("export ") :].partition("=")
            found[name] = shlex.split(value)[0] if value else ""
    return found


def venv_path() -> str:
    """PATH with the virtualenv first, once: a shell that sourced platform.env has it there already, and Airflow's
    settings (whose change restarts it) must not differ by that."""
    rest = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != str(VENV_BIN)]
    return os.pathsep.join([str(VENV_BIN), *rest])


def unreachable(what: str, conn_id: str, where: str) -> SystemExit:
    return SystemExit(
        f"[platform] the configured {what} ({env_name(conn_id)}, {where}) is unreachable. Start it, or fix or unset "
        f"{env_name(conn_id)} to use a local {what} of this platform; nothing was started and {ENV_FILE} is unchanged"
    )


def write_env(env: dict[str, str]) -> None:
    lines = ["# Written by `make up`: the settings the platform runs with. Contains credentials; keep it private."]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    private_file(ENV_FILE, "\n".join(lines) + "\n")


def connections() -> dict[str, str]:
    """The platform's connections as AIRFLOW_CONN_* values: the configured ones, else local servers started now."""
    pg_conn, kafka_conn = configured(PG_CONN), configured(KAFKA_CONN)
    if pg_conn and not postgres.reachable(postgres_params(pg_conn)):
        raise unreachable("Postgres", PG_CONN, f"{pg_conn.host}:{pg_conn.port}")
    if kafka_conn and not kafka.reachable(kafka_python_config(kafka_conn)):
        raise unreachable("Kafka", KAFKA_CONN, ",".join(kafka_python_config(kafka_conn)["bootstrap_servers"]))
    registry = configured(REGISTRY_CONN)
    if registry:
        url = shown_url(schema_registry_config(registry)["url"])  # a malformed connection fails here, saying why
        if not schema_registry.reachable(registry):
            raise unreachable("schema registry", REGISTRY_CONN, url)
    if pg_conn:
        say(f"using the configured Postgres at {pg_conn.host}:{pg_conn.port}")
    else:
        pg = postgres.start()
        pg_conn = parse_connection(
            PG_CONN,
            json.dumps(
                {
                    "conn_type": "postgres",
                    "host": pg["host"],
                    "port": pg["port"],
                    "login": pg["user"],
                    "password": pg["password"],
                    "schema": pg["dbname"],
                }
            ),
        )
    if kafka_conn:
        say(f"using the configured Kafka at {kafka_python_config(kafka_conn)['bootstrap_servers']}")
    else:
        config = kafka.start()
        kafka_conn = parse_connection(
            KAFKA_CONN,
            json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": ",".join(config["bootstrap_servers"])}}),
        )
    local_submit = (
        {"conn_type": "spark", "host": f"spark://{spark_cluster.HOST}", "port": SPARK_MASTER_PORT}
        if CLUSTER
        else {"conn_type": "spark", "host": "local[*]"}
    )
    submit_value = os.environ.get(env_name(SPARK_SUBMIT_CONN)) or json.dumps(local_submit)
    connect_value = os.environ.get(env_name(SPARK_CONNECT_CONN)) or to_env_value(
        spark_connect.local_connection(SPARK_CONNECT_CONN)
    )
    registry_value = to_env_value(registry or schema_registry.local_connection(REGISTRY_CONN))
    return {
        env_name(PG_CONN): to_env_value(pg_conn),
        env_name(KAFKA_CONN): to_env_value(kafka_conn),
        env_name(SPARK_SUBMIT_CONN): submit_value,
        env_name(SPARK_CONNECT_CONN): connect_value,
        env_name(REGISTRY_CONN): registry_value,
    }


def selects_local_spark_connect(pipelines_dir: Path) -> list[str]:
    """Pipelines declared in the folder whose Spark connection is the Spark Connect server of this platform."""
    return [p.name for p in _declared(pipelines_dir) if p.spark_conn_id == SPARK_CONNECT_CONN]


def reads_local_registry(pipelines_dir: Path) -> list[str]:
    """Pipelines declared in the folder whose values name their schema in the schema registry of this platform, and
    those that take their fields from it (which cannot be loaded before it runs)."""
    if not pipelines_dir.is_dir():
        return []
    pipelines, errors = load_declarations(pipelines_dir)
    return [p.name for p in pipelines if p.reads_registry and p.schema_registry_conn_id == REGISTRY_CONN] + [
        Path(e.source).stem for e in errors if e.field.startswith("schema.from_registry")
    ]


def prepare_target_tables(pipelines_dir: Path) -> None:
    """Create or evolve the declared pipelines' targets; one that does not fit is reported, and refused again by its
    DAG's plan task, without keeping the platform from starting."""
    for result in prepare_targets(_declared(pipelines_dir), "make up"):
        say(f"warning: {result}" if isinstance(result, Exception) else result.summary())


def _declared(pipelines_dir: Path) -> list:
    if not pipelines_dir.is_dir():
        return []
    pipelines, _ = load_declarations(pipelines_dir)  # broken declarations are the dag-processor's to report
    return pipelines


def claim_state_folder() -> None:
    """A state folder holds one topology's data (a single broker's topics cannot become a cluster's)."""
    STATE.mkdir(parents=True, exist_ok=True)
    marker = STATE / "topology"
    if marker.exists() and marker.read_text().strip() != TOPOLOGY:
        raise SystemExit(
            f"[platform] {STATE} holds a {marker.read_text().strip()} platform, not a {TOPOLOGY} one: use "
            f"another state folder (STATE=...), or `make clean` this one"
        )
    marker.write_text(TOPOLOGY + "\n")


def up(
    with_airflow_services: bool,
    pipelines_dir: Path,
    with_spark_connect: bool = False,
    with_schema_registry: bool = False,
) -> None:
    claim_state_folder()
    # Servers of someone else's are not ours to start; asked before the env below names the local ones.
    own_spark_connect, own_registry = not configured(SPARK_CONNECT_CONN), not configured(REGISTRY_CONN)
    own_spark_cluster = CLUSTER and not configured(SPARK_SUBMIT_CONN)
    conns = connections()
    pg = postgres_params(parse_connection(PG_CONN, conns[env_name(PG_CONN)]))
    env = {
        "MICROINGEST_HOME": str(REPO),
        "MICROINGEST_STATE": str(STATE),
        "MICROINGEST_INSTALL": str(INSTALLED),
        "MICROINGEST_TOPOLOGY": TOPOLOGY,
        "MICROINGEST_PIPELINES_DIR": str(pipelines_dir),
        "PATH": venv_path(),
        "SPARK_LOCAL_DIRS": str(SPARK_SCRATCH),
        "SPARK_SUBMIT_OPTS": spark_submit_opts(os.environ.get("SPARK_SUBMIT_OPTS", "")),
        **conns,
        **airflow.airflow_env(pg),
    }
    write_env(env)
    os.environ.update(env)
    SPARK_SCRATCH.mkdir(parents=True, exist_ok=True)

    try:
        applied = migrate(postgres_params(get_connection(PG_CONN)))
    except Refused as exc:  # a database the platform cannot use (not UTF8): say so, no traceback
        raise SystemExit(f"[platform] {exc}") from None
    say(f"schema up to date ({len(applied)} migration(s) applied now)")
    if own_spark_cluster:
        spark_cluster.start()
    # The two JVM servers start side by side and while Airflow's database migrates; each is waited for where it is
    # first needed.
    selecting = selects_local_spark_connect(pipelines_dir) if own_spark_connect else []
    serving_connect = (with_spark_connect or bool(selecting) or CLUSTER) and own_spark_connect
    if selecting:
        say(f"pipeline(s) {', '.join(selecting)} run on the local Spark Connect server")
    if serving_connect:
        spark_connect.launch()
    reading = reads_local_registry(pipelines_dir) if own_registry else []
    if reading:
        say(f"pipeline(s) {', '.join(reading)} read values framed with schemas of the local schema registry")
    serving_registry = (with_schema_registry or bool(reading)) and own_registry
    if serving_registry:
        schema_registry.launch()
    postgres.ensure_database({**pg, "dbname": "postgres"}, "airflow")
    say("airflow db migrate (first run takes a minute)")
    subprocess.run(
        [str(VENV_BIN / "airflow"), "db", "migrate"], env={**os.environ, **env}, check=True, stdout=subprocess.DEVNULL
    )
    airflow.make_users(env)
    if serving_registry:
        schema_registry.ready()
    prepare_target_tables(pipelines_dir)  # after the registry: a declaration may take its fields from it
    if with_airflow_services:
        pipelines_dir.mkdir(parents=True, exist_ok=True)
        job_forks.start()  # before Airflow: its first tasks find it
        airflow.start(env)
    if serving_connect:
        spark_connect.ready()
    status(show_password=False)  # `make up` output ends up in CI logs; the password is shown where a person asks


def down() -> None:
    airflow.stop_all()
    job_forks.stop_server()
    spark_connect.stop_server()
    spark_cluster.stop_all()
    schema_registry.stop_server()
    kafka.stop_broker()
    postgres.stop()
    left = sweep()
    if left:
        say(f"killed {len(left)} process(es) left behind by services that were gone: {left}")
    shutil.rmtree(SPARK_SCRATCH, ignore_errors=True)  # every Spark JVM of the platform is gone


def status(show_password: bool = True) -> None:
    rows = [("postgres", f"127.0.0.1:{PG_PORT}", postgres.server_pid(), postgres.log_file())]
    rows += [
        (kafka.name(n), kafka.bootstrap_servers()[n - 1], shown_state(kafka.name(n)), kafka.log_file(n))
        for n in kafka.nodes()
    ]
    if SPARK_WORKERS:
        rows.append(
            (
                spark_cluster.MASTER,
                f"{spark_cluster.master_url()[8:]} (UI :{SPARK_MASTER_UI_PORT})",
                shown_state(spark_cluster.MASTER),
                spark_cluster.log_file(spark_cluster.MASTER),
            )
        )
        rows += [
            (
                spark_cluster.worker_name(n),
                f"UI :{SPARK_MASTER_UI_PORT + n}",
                shown_state(spark_cluster.worker_name(n)),
                spark_cluster.log_file(spark_cluster.worker_name(n)),
            )
            for n in range(1, SPARK_WORKERS + 1)
        ]
    rows += [
        (
            "spark connect",
            f"127.0.0.1:{SPARK_CONNECT_PORT}",
            shown_state(spark_connect.NAME),
            spark_connect.log_file(),
        ),
        ("job forks", str(settings.job_forks_socket() or "off"), shown_state(job_forks.NAME), job_forks.log_file()),
        (
            "schema registry",
            f"127.0.0.1:{SCHEMA_REGISTRY_PORT}",
            shown_state(schema_registry.NAME),
            schema_registry.log_file(),
        ),
    ]
    for service in airflow.services():
        port = f"127.0.0.1:{AIRFLOW_PORT}" if service == "api-server" else ""
        rows.append(
            (
                f"airflow {service}",
                port,
                shown_state(f"airflow-{service}"),
                STATE / "airflow" / "logs" / f"{service}.log",
            )
        )
    print(f"topology {TOPOLOGY}, state {STATE}")
    print(f"{'service':<22} {'address':<24} {'pid':<8} log")
    for name, addr, pid, log in rows:
        print(f"{name:<22} {addr:<24} {pid!s:<8} {log}")
    print(f"Airflow UI: http://127.0.0.1:{AIRFLOW_PORT}  login: {airflow.login(show_password)}")
    print(f"Connection settings: source {ENV_FILE}")


def control(action: str, service: str) -> None:
    """Stop, start, restart or crash one local service (the chaos tests break them on purpose)."""
    if service == "airflow":  # its start needs the platform's settings: `up` brings it back
        if action != "stop":
            raise SystemExit("[platform] start Airflow with `up`")
        airflow.stop_all()
        return
    stop_and_start = {
        "spark-connect": (spark_connect.stop_server, spark_connect.start),
        "job-forks": (job_forks.stop_server, job_forks.start),
        "schema-registry": (schema_registry.stop_server, schema_registry.start),
        "kafka": (kafka.stop_broker, kafka.start),
    }
    if len(kafka.nodes()) > 1:  # one broker of the cluster
        stop_and_start.update(
            {kafka.name(n): (lambda n=n: kafka.stop_broker(n), lambda n=n: kafka.start(n)) for n in kafka.nodes()}
        )
    if service in stop_and_start:
        stop_service, start_service = stop_and_start[service]
        if action in ("stop", "restart"):
            stop_service()
        if action in ("start", "restart"):
            start_service()
        return
    if not postgres.is_local_cluster():
        raise SystemExit("[platform] Postgres is not a local cluster of this platform; not touching it")
    {"stop": postgres.stop, "restart": postgres.restart, "start": postgres.start, "crash": postgres.crash}[action]()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up_cmd = sub.add_parser("up", help="start what is not running, apply migrations, write platform.env")
    up_cmd.add_argument(
        "--no-airflow-services", action="store_true", help="prepare Airflow's database but start no Airflow process"
    )
    up_cmd.add_argument(
        "--pipelines-dir",
        type=Path,
        default=Path(os.environ.get("MICROINGEST_PIPELINES_DIR", REPO / "pipelines")),
        help="the declarations Airflow serves (default: $MICROINGEST_PIPELINES_DIR or pipelines/)",
    )
    up_cmd.add_argument(
        "--spark-connect",
        action="store_true",
        help="start the local Spark Connect server even if no declared pipeline selects it",
    )
    up_cmd.add_argument(
        "--schema-registry",
        action="store_true",
        help="start the local schema registry (unless AIRFLOW_CONN_MICROINGEST_SCHEMA_REGISTRY points at one)",
    )
    sub.add_parser("down", help="stop everything started by `up`")
    sub.add_parser("status", help="what runs where, with the Airflow login")
    sub.add_parser("leftovers", help="list any process of the platform still alive (after `down`: exit 1 if any)")
    sub.add_parser("clean", help="stop everything and delete the local Postgres cluster (may live outside the state)")
    for action in ("stop", "start", "restart"):
        cmd = sub.add_parser(
            action, help=f"{action} one local service" + (" (airflow: all of it)" if action == "stop" else "")
        )
        brokers = tuple(kafka.name(n) for n in kafka.nodes()) if len(kafka.nodes()) > 1 else ()
        cmd.add_argument(
            "service",
            choices=("kafka", *brokers, "postgres", "spark-connect", "job-forks", "schema-registry")
            + (("airflow",) if action == "stop" else ()),
        )
    crash = sub.add_parser("crash", help="stop Postgres as a power cut would, then start it (crash recovery)")
    crash.add_argument("service", choices=("postgres",))
    args = parser.parse_args()
    if args.command == "up":
        up(not args.no_airflow_services, args.pipelines_dir.resolve(), args.spark_connect, args.schema_registry)
    elif args.command == "down":
        down()
    elif args.command == "clean":
        down()
        postgres.remove()
    elif args.command == "leftovers":
        left = leftovers()
        for pid, command in left.items():
            print(f"{pid:>8}  {command}")
        say(f"{len(left)} process(es) of the platform alive")
        raise SystemExit(1 if left else 0)
    elif args.command in ("stop", "start", "restart", "crash"):
        control(args.command, args.service)
    else:
        status()


if __name__ == "__main__":
    main()
