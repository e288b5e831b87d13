"""A job run as a child process of an Airflow task: its output into the task log, and a stop when the task is killed.

The operator runs the ingest job this way when the pipeline's Spark connection is a Spark Connect server: the job is
a Python client of that server, with no spark-submit in between. A job whose imports are better done once
(`forkable`: the ingest job's script and its arguments) is asked of the job-forks server first (`spark.job_forks`),
and spawned as a new interpreter when that server is not there or refuses.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from typing import Any

from microingest import settings
from microingest.spark import job_forks


class JobProcess:
    # `log`: a task's own logger (Airflow gives tasks a structlog one), so that the job's output lands in the task log
    def __init__(self, argv: list[str], env: dict[str, str], log: logging.Logger | Any, forkable: bool = False):
        self.argv, self.env, self.log, self.forkable = argv, env, log, forkable
        self._proc: subprocess.Popen | None = None
        self._forked: job_forks.ForkedJob | None = None

    def run(self) -> int:
        """Run to completion; returns the exit code."""
        if self.forkable and (code := self._run_forked()) is not None:
            return code
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
        self._log_lines(self._proc.stdout)
        return self._proc.wait()

    def _run_forked(self) -> int | None:
        """The job forked by the job-forks server, run to completion; None when the server did not start it."""
        path = settings.job_forks_socket()
        if path is None:
            return None
        read_end, write_end = os.pipe()
        try:
            started = job_forks.start(path, self.argv, self.env, os.getcwd(), write_end)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the job holds its own copy: the pipe ends when the job does
        if isinstance(started, str):
            os.close(read_end)
            self.log.info("%s; the job starts as a new interpreter", started)
            return None
        self._forked = started
        self.log.info("started %s (pid %d, forked by the job-forks server)", " ".join(self.argv), started.pid)
        try:
            with open(read_end, encoding="utf-8", errors="replace") as output:
                self._log_lines(output)
            code = started.wait()
        finally:
            started.close()
        assert code is not None
        return code

    def _log_lines(self, output) -> None:
        for line in output:
            self.log.info("%s", line.rstrip("\n"))

    def stop(self, grace_seconds: float = job_forks.STOP_GRACE_SECONDS) -> None:
        """SIGTERM (the job interrupts its server-side work and discards its batch), then SIGKILL after the grace."""
        if self._forked is not None:
            self._stop_forked(self._forked, grace_seconds)
            return
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

    def _stop_forked(self, job: job_forks.ForkedJob, grace_seconds: float) -> None:
        try:
            if job.wait(0) is not None:
                return
        except ConnectionError:  # its watcher is gone, so no one reports its end: signal it all the same
            pass
        self.log.info("stopping the job (pid %d)", job.pid)
        try:
            os.killpg(job.pid, signal.SIGTERM)
            if job.wait(grace_seconds) is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
        except (ConnectionError, ProcessLookupError):  # it ended, or its watcher is gone
            pass
