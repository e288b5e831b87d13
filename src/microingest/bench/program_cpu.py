"""CPU time by program while a contender ran: each service of the local platform (by the pid file its supervisor
keeps, `.state/run/NAME.pid`: the broker, the Spark Connect server, Airflow's scheduler ...), Postgres, and the bench
itself with the processes it started (the hand-written loops, spark-submit). What the machine spent beyond them is
"other". Where a contender's CPU goes is what says which part of it to make cheaper.

Each program's time is its process tree's, ended processes included (as `postgres_cpu.tree_cpu_seconds` counts them)
but not another program's tree, less its own idle rate, measured with nothing running (the scheduler's loop, the
broker's housekeeping).
"""

from __future__ import annotations

import time

import psutil

from microingest import settings
from microingest.bench.postgres_cpu import postmaster

BENCH = "bench"
POSTGRES = "postgres"
OTHER = "other"


def programs(postgres_port: int) -> dict[str, psutil.Process]:
    """The platform's running programs by name, Postgres' postmaster, and this process (BENCH)."""
    found: dict[str, psutil.Process] = {}
    for pid_file in sorted((settings.state_dir() / "run").glob("*.pid")):
        try:
            found[pid_file.stem] = psutil.Process(int(pid_file.read_text().strip()))
        except (ValueError, OSError, psutil.Error):  # a service stopped, or its file half written
            continue
    server = postmaster(postgres_port)
    if server is not None:
        found[POSTGRES] = server
    found[BENCH] = psutil.Process()
    return found


def _seconds(roots: dict[str, psutil.Process]) -> dict[str, float]:
    pids = {root.pid for root in roots.values()}
    spent = {}
    for name, root in roots.items():
        try:
            spent[name] = _tree(root, pids)
        except psutil.Error:  # the program ended: what it spent is lost with it
            continue
    return spent


def _tree(root: psutil.Process, roots: set[int]) -> float:
    """`root`'s CPU seconds with its descendants', ended ones included, but not those of another program's tree (the
    supervisor is every service's parent; what it reaps, orphans of the services, is its own)."""
    t = root.cpu_times()
    total = t.user + t.system + t.children_user + t.children_system
    for child in root.children():
        if child.pid in roots:
            continue
        try:
            total += _tree(child, roots)
        except psutil.NoSuchProcess:  # ended since listed: its time is now in its parent's children times
            continue
    return total


class ProgramCpu:
    """`with ProgramCpu(roots, idle): ...` → `.seconds`: each program's CPU seconds inside the block, less its `idle`
    rate (CPU seconds per second; never below 0); `.rates()`: each program's seconds per second of the block."""

    def __init__(self, roots: dict[str, psutil.Process], idle: dict[str, float] | None = None):
        self.roots, self.idle = roots, idle or {}
        self.seconds: dict[str, float] = {}
        self.elapsed = 0.0

    def __enter__(self) -> ProgramCpu:
        self._start, self._spent = time.monotonic(), _seconds(self.roots)
        return self

    def __exit__(self, *exc) -> None:
        self.elapsed = time.monotonic() - self._start
        end = _seconds(self.roots)
        self.seconds = {
            name: max(end[name] - start - self.idle.get(name, 0.0) * self.elapsed, 0.0)
            for name, start in self._spent.items()
            if name in end
        }

    def rates(self) -> dict[str, float]:
        return {name: spent / self.elapsed for name, spent in self.seconds.items()} if self.elapsed else {}


def with_other(by_program: dict[str, float], machine_seconds: float | None) -> dict[str, float]:
    """The programs' seconds and OTHER: what the machine spent beyond them (never below 0)."""
    if machine_seconds is None:
        return dict(by_program)
    return {**by_program, OTHER: max(machine_seconds - sum(by_program.values()), 0.0)}
