"""The local job-forks server (microingest.spark.job_fork_server): Spark Connect jobs of Airflow's tasks start as
forks of it, their imports done. Started with Airflow; a task that finds it gone or running older code spawns its job
instead, so stopping or restarting it never fails a run that has not started."""

from __future__ import annotations

import os
import sys

from local_platform.config import STATE
from local_platform.processes import running_pid, say, spawn, stop, wait_for, without_credentials
from microingest import settings
from microingest.spark import job_forks

NAME = "job-forks"


def log_file():
    return STATE / "job-forks" / "server.log"


def start() -> None:
    path = settings.job_forks_socket()
    if path is None:
        say("MICROINGEST_JOB_FORKS is off: every job starts as a new interpreter")
        return
    # A server of older code would refuse every job (each would be spawned, seconds slower): start it anew.
    marker, code = STATE / "run" / "job-forks.fingerprint", job_forks.fingerprint()
    if running_pid(NAME) and (not marker.exists() or marker.read_text() != code):
        say("microingest's code changed since the job-forks server started; restarting it")
        stop(NAME)
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(code)
    # No credential: each request brings its job's environment.
    argv = [sys.executable, "-m", "microingest.spark.job_fork_server", "--socket", str(path)]
    spawn(NAME, argv, log_file(), without_credentials(os.environ))
    wait_for("the job-forks server", lambda: job_forks.answers(path), 60, log_file())


def stop_server() -> None:
    stop(NAME)
