"""Peak memory of a contender while it runs: its own processes (found by a marker in their command line, with all
their descendants) split into the Spark JVM and Python, plus the local Postgres server's processes.

Memory is summed as PSS (proportional set size): like RSS, but pages shared between processes (Postgres' shared
buffers, forked Python workers) are divided among them instead of counted once per process.

A sampler sees only what is alive when it looks: at the contender's start, every INTERVAL seconds, and at its end. A
process that starts and ends between two looks (the hand-written loop on a few hundred records) is never seen, so a
contender whose process can be that short measures that process's peak itself (contenders.Run.own_peak_rss_mib).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil

ROLES = ("spark_jvm", "python", "postgres")
INTERVAL = 0.5  # seconds between two samples


@dataclass
class Peaks:
    mib: dict[str, float] = field(default_factory=dict)  # role -> peak MiB; a role never seen is absent

    def to_dict(self) -> dict[str, float]:
        return {r: round(v, 1) for r, v in self.mib.items()}


def _role(name: str) -> str | None:
    if name == "java":
        return "spark_jvm"
    if name.startswith("python"):
        return "python"
    return None


class PeakMemory:
    """Samples at `with` entry, every `interval` seconds in a thread, and at exit."""

    def __init__(self, markers: tuple[str, ...], interval: float = INTERVAL):
        self.markers, self.interval = markers, interval
        self.peaks = Peaks()
        # The sampler thread's own CPU (each look reads every process's smaps_rollup: about 40 ms beside a Spark JVM):
        # the bench's, not the contender's, so taken off the contender's CPU.
        self.cpu_seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"peak-memory-{markers[0]}", daemon=True)

    def __enter__(self) -> PeakMemory:
        # Before the contender starts, not whenever the thread gets to it: what runs beside it (Postgres) is in the
        # peaks however soon the contender ends.
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()  # a long-lived server's memory after the contender's last request, not an interval before

    def _run(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(self.interval):
            self.sample()
        self.cpu_seconds = time.thread_time() - started

    def sample(self) -> None:
        procs = list(psutil.process_iter(["pid", "ppid", "name", "cmdline"]))
        children: dict[int, list[psutil.Process]] = {}
        for p in procs:
            children.setdefault(p.info["ppid"], []).append(p)
        ours = [p for p in procs if any(m in " ".join(p.info["cmdline"] or ()) for m in self.markers)]
        seen, totals = set(), dict.fromkeys(ROLES, 0.0)
        while ours:
            p = ours.pop()
            if p.pid in seen:
                continue
            seen.add(p.pid)
            ours.extend(children.get(p.pid, ()))
            role = _role(p.info["name"] or "")
            if role:
                totals[role] += _pss_mib(p)
        for p in procs:
            if p.info["name"] == "postgres":
                totals["postgres"] += _pss_mib(p)
        for role, value in totals.items():
            if value:
                self.peaks.mib[role] = max(self.peaks.mib.get(role, 0.0), value)


def _pss_mib(proc: psutil.Process) -> float:
    """From /proc/<pid>/smaps_rollup: the kernel sums it, where reading all of /proc/<pid>/smaps (psutil's
    memory_full_info) walks every mapping under the process's memory lock and slows a large JVM down."""
    try:
        with open(f"/proc/{proc.pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
