"""CPU time the whole machine spent on a contender: every process it keeps busy (the Spark JVM, Python workers, the
job's client, Airflow's scheduler and task supervisor, the broker serving the reads, Postgres taking the COPY), not
only those it started. CPU seconds per record is the figure that does not move with the machine's speed.

The kernel's busy time (all but idle and iowait; guest time is already inside user time) is read before and after.
The platform runs beside every contender (the scheduler's loop, the broker's housekeeping), so its idle rate,
measured with nothing running before the contenders start, is taken off for the contender's seconds.
"""

from __future__ import annotations

import time

import psutil

IDLE_SECONDS = 10.0  # how long the idle platform is watched


def busy_seconds() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0) + getattr(t, "steal", 0.0)


def idle_rate(seconds: float = IDLE_SECONDS) -> float:
    """CPU seconds per second the machine spends with no contender running."""
    start, busy = time.monotonic(), busy_seconds()
    time.sleep(seconds)
    return (busy_seconds() - busy) / (time.monotonic() - start)


class MachineCpu:
    """`with MachineCpu(idle): ...` → `.seconds`: the machine's CPU inside the block less `idle` per second of it
    (never below 0)."""

    def __init__(self, idle: float):
        self.idle = idle
        self.seconds = 0.0

    def __enter__(self) -> MachineCpu:
        self._start, self._busy = time.monotonic(), busy_seconds()
        return self

    def __exit__(self, *exc) -> None:
        elapsed = time.monotonic() - self._start
        self.seconds = max(busy_seconds() - self._busy - self.idle * elapsed, 0.0)
