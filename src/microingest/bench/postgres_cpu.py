"""CPU time the local Postgres server spent while a contender ran: every process of the cluster, those that ended
meanwhile too.

A backend lives as long as its connection, and an executor's connection can end within a sampler's interval, so this
is not sampled: it is read from the kernel's accounting at the start and at the end. A process's CPU time stays in
its `/proc` entry while it runs; once it ends and its parent (the postmaster) reaps it, the kernel adds it to the
parent's `children` times. So the postmaster's own and children's times plus each live child's times, read at two
moments, differ by exactly what the cluster used between them.
"""

from __future__ import annotations

import psutil


def tree_cpu_seconds(root: psutil.Process, apart: frozenset[int] = frozenset()) -> float:
    """CPU seconds of `root` and every process it started, alive or ended (once reaped), but not of the trees of the
    processes `apart` (`program_cpu`: another program's, whose parent is the supervisor). The children first: one
    that ends meanwhile is in its parent's children times when the parent is read after it."""
    total = 0.0
    for child in root.children():
        if child.pid in apart:
            continue
        try:
            total += tree_cpu_seconds(child, apart)
        except psutil.NoSuchProcess:  # ended since listed: its time is in its parent's children times, read below
            continue
    return total + cpu_seconds(root)


def cpu_seconds(proc: psutil.Process) -> float:
    """A process's own CPU seconds and those of its children it has reaped."""
    t = proc.cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def postmaster(port: int) -> psutil.Process | None:
    """The postmaster listening on this machine's `port`, or None (a remote server, or not ours to read)."""
    try:
        listening = [
            c.pid
            for c in psutil.net_connections("tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == port and c.pid
        ]
    except psutil.AccessDenied:
        return None
    for pid in listening:
        try:
            proc = psutil.Process(pid)
            if proc.name() == "postgres":
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


class PostgresCpu:
    """`with PostgresCpu(postmaster(port)): ...` → `.seconds` the cluster's processes used inside the block (None:
    no local cluster to read)."""

    def __init__(self, root: psutil.Process | None):
        self.root = root
        self.seconds: float | None = None

    def __enter__(self) -> PostgresCpu:
        self._start = tree_cpu_seconds(self.root) if self.root else None
        return self

    def __exit__(self, *exc) -> None:
        if self._start is not None:
            self.seconds = tree_cpu_seconds(self.root) - self._start
