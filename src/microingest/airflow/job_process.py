"""A job run as a child process of an Airflow task: its output into the task log, and a stop when the task is killed.

The operator runs the ingest job this way when the pipeline's Spark connection is a Spark Connect server: the job is
a Python client of that server, with no spark-submit in between.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Any


class JobProcess:
    # `log`: a task's own logger (Airflow gives tasks a structlog one), so that the job's output lands in the task log
    def __init__(self, argv: list[str], env: dict[str, str], log: logging.Logger | Any):
        self.argv, self.env, self.log = argv, env, log
        self._proc: subprocess.Popen | None = None

    def run(self) -> int:
        """Run to completion; returns the exit code."""
        self.log.info("starting %s", " ".join(self.argv))
        self._proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self.log.info("%s", line.rstrip("\n"))
        return self._proc.wait()

    def stop(self, grace_seconds: float = 30) -> None:
        """SIGTERM (the job interrupts its server-side work and discards its batch), then SIGKILL after the grace."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self.log.info("stopping the job (pid %d)", proc.pid)
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
