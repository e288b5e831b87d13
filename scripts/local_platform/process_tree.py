"""Finding every process of a service of the local platform, however it was started, by what supervisord does not
track. Three ways, each catching what the others may miss: the service's cgroup (cgroup v2, when this user may create
one: nothing escapes it); the MICROINGEST_SERVICE variable every process of the service inherits (unless it overwrites
its environment, as processes that rename themselves do); and, without a cgroup, orphans, as supervisord runs as a
subreaper, so a process whose parent died is handed to it rather than to init. MICROINGEST_CGROUPS=off keeps to the
other two, as on a machine without a cgroup v2 group this user may write."""

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


def _tag(pid: int) -> str | None:
    """The process's MICROINGEST_SERVICE; None without one (or when its environment is gone or overwritten)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for var in f.read().split(b"\0"):
                if var.startswith(f"{TAG}=".encode()):
                    return var.split(b"=", 1)[1].decode(errors="replace")
    except OSError:
        pass
    return None


def orphans(subreaper: int, keep: set[int], tag: str) -> list[int]:
    """The subreaper's children other than those in keep (a subreaper's children are the processes it started and the
    orphans handed to it) that carry this tag or none: one carrying another service's is that service's to end, and
    one carrying the subreaper's own is a program it is starting."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in keep:
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == subreaper:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return living([pid for pid in found if _tag(pid) in (None, tag)])


def left_behind(run_dir: Path, name: str, subreaper: int | None, keep: set[int]) -> list[int]:
    """What is alive of a service beyond the processes in keep (and this one): in its cgroup, or else carrying its tag
    or an untagged orphan handed to the platform's subreaper (whose service cannot be told any more: what is left of
    one that died)."""
    group, tag = service_cgroup(run_dir, name), tag_of(run_dir, name)
    found = set(cgroup_members(group)) | set(tagged(tag))
    if subreaper and group is None:
        found |= set(orphans(subreaper, keep, tag))
    return living(sorted(found - keep - {os.getpid()}))


def kill_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):  # gone meanwhile, or (a reused pid) not ours
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
    root = None if os.environ.get("MICROINGEST_CGROUPS") == "off" else cgroup2_mount()
    if root is None:
        return None
    return root / f"microingest-{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:12]}"


def service_cgroup(run_dir: Path, name: str) -> Path | None:
    group = platform_cgroup(run_dir)
    return group / name if group else None


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
