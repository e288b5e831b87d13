"""Where the local platform lives, its topology, and which ports it takes (each overridable, so two platforms can run
side by side).

Topology `single` (the default) runs one process of each service. `cluster` (`make up TOPOLOGY=cluster`) is the
production shape on one machine: three Kafka brokers, a Spark standalone master with two workers, Airflow on the Edge
executor with two workers. It lives in a state folder of its own and takes ports 1000 above the single one's, so both
can run at once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("MICROINGEST_STATE", REPO / ".state")).absolute()
VENV_BIN = Path(sys.executable).parent
INSTALLED = Path(os.environ.get("MICROINGEST_INSTALL", REPO / ".state"))  # what `make install` downloaded
# The cluster's workers run this Python: pyspark's requirements only (`make install`), as a team's Spark cluster
# would; every job brings microingest itself (microingest.spark.job_bundle).
WORKER_PYTHON = INSTALLED / "spark" / "worker-python"
ENV_FILE = STATE / "platform.env"
# Spark's scratch space (SPARK_LOCAL_DIRS: block files, each session's unpacked files) for every Spark JVM started with
# the platform's settings. A JVM that is killed rather than stopped skips the shutdown hook that removes its folder,
# and in /tmp, the default, those filled the disk; here `down` removes them with the processes.
SPARK_SCRATCH = STATE / "spark-scratch"


def spark_submit_opts(given: str) -> str:
    """SPARK_SUBMIT_OPTS for the drivers the platform's tasks start: `given`, with their temporary folders (where
    spark-submit copies a job's bundle, java.io.tmpdir, which SPARK_LOCAL_DIRS does not move) in the scratch space."""
    if "-Djava.io.tmpdir=" in given:
        return given
    return f"{given} -Djava.io.tmpdir={SPARK_SCRATCH}".strip()


TOPOLOGIES = ("single", "cluster")
TOPOLOGY = os.environ.get("MICROINGEST_TOPOLOGY") or "single"
if TOPOLOGY not in TOPOLOGIES:
    raise SystemExit(f"[platform] unknown topology {TOPOLOGY!r} (MICROINGEST_TOPOLOGY); one of {', '.join(TOPOLOGIES)}")
CLUSTER = TOPOLOGY == "cluster"
KAFKA_NODES = 3 if CLUSTER else 1
SPARK_WORKERS = 2 if CLUSTER else 0
AIRFLOW_WORKERS = 2 if CLUSTER else 0


def _port(name: str, single: int) -> int:
    return int(os.environ.get(f"MICROINGEST_{name}_PORT") or single + (1000 if CLUSTER else 0))


# Below Linux's ephemeral range (32768-60999), as every port here: a port in it can be held by some outgoing
# connection just when Postgres starts, and the start fails with "Address already in use".
PG_PORT = _port("PG", 15432)
# Broker n (from 1) listens on these plus 100 * (n - 1).
KAFKA_PORT = _port("KAFKA", 9092)
CONTROLLER_PORT = _port("KAFKA_CONTROLLER", 9093)
KAFKA_SASL_PORT = _port("KAFKA_SASL", 9094)
AIRFLOW_PORT = _port("AIRFLOW", 8080)
SCHEDULER_HEALTH_PORT = _port("SCHEDULER_HEALTH", 8974)  # the scheduler's /health
SPARK_CONNECT_PORT = _port("SPARK_CONNECT", 15002)
SPARK_CONNECT_UI_PORT = _port("SPARK_CONNECT_UI", 15040)  # the cluster's Connect server's UI and REST API
SCHEMA_REGISTRY_PORT = _port("SCHEMA_REGISTRY", 18081)
# The standalone master's port and web UI; worker n's web UI is the master's plus n.
SPARK_MASTER_PORT = _port("SPARK_MASTER", 15077)
SPARK_MASTER_UI_PORT = _port("SPARK_MASTER_UI", 15080)

if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))


def private_file(path: Path, text: str) -> None:
    """Write a file only its owner can read, without a moment of wider permissions, and whole: a reader sees the old
    content or the new (a service restarting reads its settings while `up` rewrites them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(partial, 0o600)  # a file left by an earlier attempt keeps its old mode through O_CREAT
    os.replace(partial, path)
