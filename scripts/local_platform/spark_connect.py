"""The local Spark Connect server: the long-lived Spark driver that pipelines with a `spark_connect` Spark connection
run on (microingest.spark.connect). Started by `up` when a declared pipeline selects it, or with `--spark-connect`."""

from __future__ import annotations

import os
import socket

from local_platform.config import SPARK_CONNECT_PORT, STATE
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
    if not listening():
        # No credential: every job brings its own connections, the server has no authentication, and its Python
        # workers run any job's code.
        spawn(NAME, spark_connect.server_argv(HOST, SPARK_CONNECT_PORT), log_file(), without_credentials(os.environ))
        wait_for("Spark Connect", listening, 180, log_file())
    wait_for("Spark Connect", lambda: spark_connect.answers(local_connection("check")), 120, log_file())
    say(f"Spark Connect server answers at sc://{HOST}:{SPARK_CONNECT_PORT}")


def stop_server() -> None:
    stop(NAME)
