"""The local Spark Connect server: the long-lived Spark driver that pipelines with a `spark_connect` Spark connection
run on (microingest.spark.connect). Started by `up` when a declared pipeline selects it, or with `--spark-connect`; in
the cluster topology, on the standalone cluster (local_platform.spark_cluster)."""

from __future__ import annotations

import os
import socket

from local_platform import spark_cluster
from local_platform.config import SPARK_CONNECT_PORT, SPARK_WORKERS, STATE, spark_submit_opts
from local_platform.processes import say, spawn, stop, wait_for, without_credentials
from microingest.spark import connect as spark_connect
from microingest.systems.connections import ConnectionInfo

NAME = "spark-connect"
HOST = "127.0.0.1"


def local_connection(conn_id: str) -> ConnectionInfo:
    return ConnectionInfo(conn_id, spark_connect.CONN_TYPE, f"sc://{HOST}", SPARK_CONNECT_PORT)


def log_file():
    return STATE / "spark-connect" / "server.log"


def listening() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((HOST, SPARK_CONNECT_PORT)) == 0


def start() -> None:
    launch()
    ready()


def launch() -> None:
    """The server's JVM started, unless it listens already; `ready` waits for it (`up` starts others meanwhile)."""
    if not listening():
        # No credential: every job brings its own connections, the server has no authentication, and its Python
        # workers run any job's code.
        # In the cluster topology its executors are the standalone cluster's; otherwise it runs them itself.
        argv = (
            spark_connect.server_argv(HOST, SPARK_CONNECT_PORT, spark_cluster.master_url(), spark_cluster.CONNECT_CONF)
            if SPARK_WORKERS
            else spark_connect.server_argv(HOST, SPARK_CONNECT_PORT)
        )
        # SPARK_SUBMIT_OPTS is for the drivers `make test` starts (a quick JVM start for short jobs); the server is
        # long-lived and keeps the JVM's defaults, all but its temporary folders: each job's bundle, unpacked by
        # addArchive under java.io.tmpdir, stays until the server stops, and a killed server never removes them.
        env = {**without_credentials(os.environ), "SPARK_SUBMIT_OPTS": spark_submit_opts("")}
        spawn(NAME, argv, log_file(), env)


def ready() -> None:
    wait_for("Spark Connect", listening, 180, log_file())
    wait_for("Spark Connect", lambda: spark_connect.answers(local_connection("check")), 120, log_file())
    say(f"Spark Connect server answers at sc://{HOST}:{SPARK_CONNECT_PORT}")


def stop_server() -> None:
    stop(NAME)
