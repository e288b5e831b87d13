"""The job on a real Spark standalone cluster (master and worker from pyspark's own classes): executors in JVMs of
their own decode the batch, one of them dies after decoding, and the single-transaction commit still lands every record
exactly once."""

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from microingest.plan.live import plan_next_batch

MASTER_PORT, MASTER_UI, WORKER_UI = 17077, 18080, 18081


@pytest.fixture
def env(submit_env):
    """A job on a standalone cluster: spark-submit with a master of its own."""
    return submit_env


def _master_state() -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{MASTER_UI}/json", timeout=5) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def spark_master(tmp_path_factory):
    spark_class = str(Path(sys.executable).parent / "spark-class")
    work = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "work")}
    logs = [open(work / name, "w") for name in ("master.log", "worker.log")]
    procs = [
        subprocess.Popen(
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(MASTER_PORT),
                "--webui-port",
                str(MASTER_UI),
            ],
            stdout=logs[0],
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    ]
    url = f"spark://127.0.0.1:{MASTER_PORT}"
    try:
        _wait(lambda: _master_state()["status"] == "ALIVE", "master", work / "master.log")
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "2",
                    "--memory",
                    "2g",
                    "--webui-port",
                    str(WORKER_UI),
                    url,
                ],
                stdout=logs[1],
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )
        _wait(lambda: any(w["state"] == "ALIVE" for w in _master_state()["workers"]), "worker", work / "worker.log")
        yield url
    finally:
        for proc in reversed(procs):
            os.killpg(proc.pid, 15)
            proc.wait(timeout=60)
        for log in logs:
            log.close()


def _wait(check, what: str, log: Path, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"Spark {what} did not start: {log.read_text()[-3000:]}")


def test_an_executor_lost_after_decoding_is_replaced_and_the_batch_still_lands_once(env, spark_master, tmp_path):
    """The first Spark task to decode a record kills its own executor JVM before its task ends (the JVM decoder's
    fault point); Spark re-runs the lost task elsewhere, which decodes the same records again, keeps one result per
    partition, and the commit lands every record exactly once."""
    env.redeclare(dead_letter={"max_fraction": 0.5})
    produced = env.produce(3000)
    # Undecodable records among them: the re-run task dead-letters its records again, and each is still kept once.
    broken = env.send([(b"k", b"not json"), (b"k", b'{"user_id": "no event_id"}')] * 20)
    plan = plan_next_batch(env.pipeline)
    fired = tmp_path / "executor-killed"

    result = env.spark_job(
        list(plan.ranges),
        master=spark_master,
        extra_conf={
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.executor.memory": "512m",
            "spark.executorEnv.MICROINGEST_FAULT": "executor_after_decode:executor",
            "spark.executorEnv.MICROINGEST_FAULT_ONCE": str(fired),
        },
    )

    assert fired.exists(), "an executor was killed"
    assert result.returncode == 0, result.stdout[-4000:]
    assert env.landed_once() == sorted(produced)
    assert sorted((p, o) for p, o, *_ in env.dead_letters()) == sorted(broken)
    [(_, _, read, written, _, _)] = env.batches()
    assert (read, written) == (3040, 3000)
