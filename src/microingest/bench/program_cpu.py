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
from microingest.bench.postgres_cpu import postmaster, tree_cpu_seconds

BENCH = "bench"
POSTGRES = "postgres"
OTHER = "other"


def programs(postgres_port: int | None) -> dict[str, psutil.Process]:
    """The platform's running programs by name, Postgres' postmaster (when a port is given), and this process
    (BENCH)."""
    found: dict[str, psutil.Process] = {}
    for pid_file in sorted((settings.state_dir() / "run").glob("*.pid")):
        try:
            found[pid_file.stem] = psutil.Process(int(pid_file.read_text().strip()))
        except (ValueError, OSError, psutil.Error):  # a service stopped, or its file half written
            continue
    server = None if postgres_port is None else postmaster(postgres_port)
    if server is not None:
        found[POSTGRES] = server
    found[BENCH] = psutil.Process()
    return found


def _seconds(roots: dict[str, psutil.Process]) -> dict[str, float]:
    pids = frozenset(root.pid for root in roots.values())
    spent = {}
    for name, root in roots.items():
        try:
            spent[name] = tree_cpu_seconds(root, pids)
        except psutil.Error:  # the program ended: what it spent is lost with it
            continue
    return spent


class ProgramCpu:
    """`with ProgramCpu(roots, idle): ...` → `.seconds`: each program's CPU seconds inside the block, less its `idle`
    rate (CPU seconds per second: below 0 for a program quieter than it idles, so that the programs and OTHER add up
    to the machine's figure); `.rates()`: each program's seconds per second of the block."""

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
            name: end[name] - start - self.idle.get(name, 0.0) * self.elapsed
            for name, start in self._spent.items()
            if name in end
        }

    def rates(self) -> dict[str, float]:
        return {name: spent / self.elapsed for name, spent in self.seconds.items()} if self.elapsed else {}


def with_other(by_program: dict[str, float], machine_seconds: float | None) -> dict[str, float]:
    """The programs' seconds and OTHER: what the machine spent beyond them. Below 0 when the processes' own
    accounting (the kernel's per-task times) came to more than its machine-wide busy time: they are counted apart."""
    if machine_seconds is None:
        return dict(by_program)
    return {**by_program, OTHER: machine_seconds - sum(by_program.values())}


def without_sampler(machine_seconds: float, by_program: dict[str, float], sampler_seconds: float) -> tuple[float, dict]:
    """The machine's and the programs' seconds (OTHER included) without the bench's memory sampler's (`PeakMemory`):
    the bench's own work, not the contender's."""
    spent = dict(by_program)
    if BENCH in spent:
        spent[BENCH] -= sampler_seconds
    machine = max(machine_seconds - sampler_seconds, 0.0)
    return machine, with_other(spent, machine)
