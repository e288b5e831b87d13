"""The cluster topology's Spark: a standalone master and two workers (pyspark's own classes), on which the Spark
Connect server and every spark-submit application run their executors."""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from pathlib import Path

import pyspark

from local_platform.config import (
    SPARK_CONNECT_UI_PORT,
    SPARK_MASTER_PORT,
    SPARK_MASTER_UI_PORT,
    SPARK_WORKERS,
    STATE,
    VENV_BIN,
    WORKER_PYTHON,
)
from local_platform.processes import spawn, stop, wait_for, without_credentials
from microingest import settings

HOST = "127.0.0.1"
MASTER = "spark-master"
WORKER_CORES, WORKER_MEMORY = 2, "4g"
# What the Spark Connect server takes of the cluster: one core on each worker (the master spreads executors out), so
# that spark-submit applications keep a core on each too.
CONNECT_CONF = {
    "spark.executor.cores": "1",
    "spark.cores.max": str(SPARK_WORKERS),
    "spark.executor.memory": "1g",
    # The Kafka source prefers the executor that read a partition last (its consumer cache); a bounded
    # read gains little from that, and waiting for it (3 s by default) can leave the other worker idle.
    "spark.locality.wait": "0",
    "spark.ui.port": str(SPARK_CONNECT_UI_PORT),
}
# The cores an application gets when it sets no spark.cores.max (spark-submit's jobs): without a cap, a running job
# takes the cores a killed Connect server frees, and the restarted server's jobs wait until that job's run ends.
SUBMIT_CORES = WORKER_CORES * SPARK_WORKERS - int(CONNECT_CONF["spark.cores.max"])


def master_url() -> str:
    return f"spark://{HOST}:{SPARK_MASTER_PORT}"


def worker_name(n: int) -> str:
    return f"spark-worker-{n}"


def root():
    return STATE / "spark-cluster"


def log_file(name: str):
    return root() / f"{name}.log"


def master_state() -> dict:
    with urllib.request.urlopen(f"http://{HOST}:{SPARK_MASTER_UI_PORT}/json", timeout=5) as resp:
        return json.loads(resp.read())


def alive_workers() -> list[dict]:
    return [w for w in master_state()["workers"] if w["state"] == "ALIVE"]


def start() -> None:
    # No credential, as the Connect server: executors run any job's code and get their connections from the job.
    # Executors find python3.X in the workers' Python (none of microingest), and log with the platform's redaction
    # as their own configuration (a job's own config path is not a cluster's).
    conf = root() / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(settings.spark_log_config(), conf / "log4j2.properties")
    env = {
        **without_credentials(os.environ),
        "SPARK_LOG_DIR": str(root()),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_CONF_DIR": str(conf),
        # spark-class would ask the first python3 on PATH where Spark is: the workers' own has no pyspark.
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "PATH": f"{WORKER_PYTHON / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    spark_class = str(VENV_BIN / "spark-class")
    master_env = {**env, "SPARK_MASTER_OPTS": f"-Dspark.deploy.defaultCores={SUBMIT_CORES}"}
    spawn(
        MASTER,
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            str(SPARK_MASTER_PORT),
            "--webui-port",
            str(SPARK_MASTER_UI_PORT),
        ],
        log_file(MASTER),
        master_env,
    )
    wait_for("Spark master", lambda: master_state()["status"] == "ALIVE", 120, log_file(MASTER))
    for n in range(1, SPARK_WORKERS + 1):
        work = root() / worker_name(n)
        work.mkdir(parents=True, exist_ok=True)
        spawn(
            worker_name(n),
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                HOST,
                "--cores",
                str(WORKER_CORES),
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                str(work),
                "--webui-port",
                str(SPARK_MASTER_UI_PORT + n),
                master_url(),
            ],
            log_file(worker_name(n)),
            env,
        )
    wait_for(
        f"{SPARK_WORKERS} Spark workers",
        lambda: len(alive_workers()) == SPARK_WORKERS,
        120,
        log_file(worker_name(SPARK_WORKERS)),
    )


def stop_all() -> None:
    for n in range(SPARK_WORKERS, 0, -1):
        stop(worker_name(n))
    stop(MASTER)
