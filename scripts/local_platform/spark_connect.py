"""The local Spark Connect server: the long-lived Spark driver that pipelines with a `spark_connect` Spark connection
run on (microingest.spark.connect). Started by `up` when a declared pipeline selects it, or with `--spark-connect`."""

from __future__ import annotations

import os
import re
import socket

from local_platform.config import SPARK_CONNECT_PORT, STATE
from local_platform.processes import say, spawn, stop, wait_for

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


_CREDENTIAL = re.compile(r"PASSWORD|SECRET|TOKEN|JWT|FERNET", re.I)


def server_env(environ: dict[str, str]) -> dict[str, str]:
    """The server's environment: no credential, since every job brings its own connections. Nothing of Airflow's
    (its connections, its config: JWT and API secrets, the fernet key, the metadata database URL with its password)
    nor anything named like a secret: the server has no authentication, and its Python workers run any job's code."""
    return {k: v for k, v in environ.items() if not k.startswith("AIRFLOW") and not _CREDENTIAL.search(k)}


def start() -> None:
    if not listening():
        spawn(NAME, spark_connect.server_argv(HOST, SPARK_CONNECT_PORT), log_file(), server_env(dict(os.environ)))
        wait_for("Spark Connect", listening, 180, log_file())
    wait_for("Spark Connect", lambda: spark_connect.answers(local_connection("check")), 120, log_file())
    say(f"Spark Connect server answers at sc://{HOST}:{SPARK_CONNECT_PORT}")


def stop_server() -> None:
    stop(NAME)
