"""Finding every process of a service of the local platform, however it was started.

Three ways, each catching what the others may miss: the service's cgroup (cgroup v2, when this user may create one:
nothing escapes it), the processes below its supervisor (a subreaper, so orphans of the tree come to it), and the
MICROINGEST_SERVICE variable every process of the service inherits (unless it overwrites its environment, as processes
that rename themselves do)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

TAG = "MICROINGEST_SERVICE"


def tag_of(run_dir: Path, name: str) -> str:
    return f"{run_dir.resolve()}::{name}"


def tagged(tag: str, prefix: bool = False) -> list[int]:
    """Processes whose MICROINGEST_SERVICE is tag (or starts with it: '<run dir>::' for all services of a platform),
    other than this one."""
    found, needle = [], f"{TAG}={tag}".encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if any(var.startswith(needle) if prefix else var == needle for var in f.read().split(b"\0")):
                    found.append(int(entry))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def descendants(root: int) -> list[int]:
    """Every process below root, however deep; with root a subreaper, that includes the orphans of its tree."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def kill_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def living(pids) -> list[int]:
    """The pids that are neither gone nor zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            continue
    return alive


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted, if it is and this user may make groups in it."""
    try:
        with open("/proc/mounts") as f:
            mounts = [line.split()[1] for line in f if line.split()[2] == "cgroup2"]
    except OSError:
        return None
    writable = [Path(m) for m in mounts if os.access(m, os.W_OK)]
    return writable[0] if writable else None


def platform_cgroup(run_dir: Path) -> Path | None:
    """The cgroup holding one group per service of the platform whose run folder this is (None without cgroup v2)."""
    root = cgroup2_mount()
    if root is None:
        return None
    return root / f"microingest-{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]}"


def cgroup_members(group: Path | None) -> list[int]:
    """Every process in the cgroup and the groups below it."""
    if group is None or not group.is_dir():
        return []
    members = []
    for procs in group.rglob("cgroup.procs"):
        try:
            members += [int(pid) for pid in procs.read_text().split()]
        except OSError:
            continue
    return members


def remove_cgroup(group: Path | None) -> None:
    """Remove the (empty) cgroup and the groups below it, deepest first."""
    if group is None or not group.is_dir():
        return
    for sub in sorted((p for p in group.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            sub.rmdir()
        except OSError:
            pass
    try:
        group.rmdir()
    except OSError:
        pass
