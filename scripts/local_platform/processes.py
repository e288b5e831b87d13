"""Background processes of the local platform: started and stopped through its supervisord, swept of what escapes it
(process_tree.py), waited for until ready."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

from local_platform import supervisord
from local_platform.config import STATE, private_file
from local_platform.process_tree import (
    cgroup_members,
    kill_all,
    left_behind,
    living,
    platform_cgroup,
    remove_cgroup,
    service_cgroup,
    tag_of,
    tagged,
)

OUT_OF_GROUP_GRACE = 5  # seconds
_CREDENTIAL = re.compile(r"PASSWORD|SECRET|TOKEN|JWT|FERNET", re.I)


def without_credentials(environ) -> dict[str, str]:
    """An environment for a service that needs none of the platform's credentials: nothing of Airflow's (its
    connections, its config: JWT and API secrets, the fernet key, the metadata database URL with its password) nor
    anything named like a secret."""
    return {k: v for k, v in environ.items() if not k.startswith("AIRFLOW") and not _CREDENTIAL.search(k)}


def say(msg: str) -> None:
    print(f"[platform] {msg}", flush=True)


def pid_file(name: str) -> Path:
    """Where service_exec.py writes the service's pid, for the scripts and tests that read it."""
    return STATE / "run" / f"{name}.pid"


def running_pid(name: str) -> int | None:
    """The service's pid while supervisord has it starting or running."""
    found = supervisord.info(name)
    return found["pid"] if found and found["statename"] in supervisord.RUNNING_STATES and found["pid"] else None


def shown_state(name: str) -> str:
    """The service's pid while it runs, else what supervisord says of it (BACKOFF, FATAL, ...); without a supervisord,
    the pid of a service still running from before it died, else "-"."""
    found = supervisord.info(name)
    if not found:
        try:
            pid = int(pid_file(name).read_text())
        except (OSError, ValueError):
            return "-"
        return f"{pid} (unsupervised)" if living([pid]) else "-"
    return str(found["pid"]) if found["statename"] in supervisord.RUNNING_STATES else found["statename"]


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str], grace: float = 30) -> int:
    """Start a service as a program of the platform's supervisord, which restarts it whenever it dies; service_exec.py
    keeps every process it starts in one cgroup; the service's pid once it runs."""
    supervisord.ensure_running(without_credentials(os.environ))
    pid = running_pid(name)
    if pid:
        say(f"{name} already running (pid {pid})")
        return pid
    log.parent.mkdir(parents=True, exist_ok=True)
    private_file(STATE / "run" / f"{name}.json", json.dumps({"argv": argv, "env": env}))
    supervisord.start(name, log, grace)
    deadline = time.time() + 10
    while not (pid := running_pid(name)) and time.time() < deadline:
        time.sleep(0.05)
    if not pid:
        raise SystemExit(f"[platform] {name} did not start; see {log} and {supervisord.LOG}")
    say(f"started {name} (pid {pid}, log {log})")
    return pid


def stop(name: str) -> None:
    """Stop a service and everything it started: supervisord its process group, then whatever left the group."""
    was_running = bool(running_pid(name))
    known = supervisord.stop(name)
    subreaper, programs = supervisord.pids()
    left = left_behind(STATE / "run", name, subreaper, programs)
    # SIGTERM first, as supervisord gave the group: a task's Spark job in a session of its own interrupts its work on
    # the server (LocalExecutor workers ignore it, hence the short grace).
    kill_all(left, signal.SIGTERM)
    deadline = time.time() + OUT_OF_GROUP_GRACE
    while living(left) and time.time() < deadline:
        time.sleep(0.1)
    kill_all(living(left_behind(STATE / "run", name, subreaper, programs)), signal.SIGKILL)
    group = service_cgroup(STATE / "run", name)
    deadline = time.time() + 10
    while living(cgroup_members(group)) and time.time() < deadline:
        time.sleep(0.1)
    remove_cgroup(group)
    pid_file(name).unlink(missing_ok=True)
    (STATE / "run" / f"{name}.json").unlink(missing_ok=True)
    if was_running or left:
        say(f"stopped {name}" + (f" and {len(left)} process(es) that had left its group" if left else ""))
    elif known:
        say(f"removed {name}, which was not running")


def leftovers() -> dict[int, str]:
    """Living processes of this platform (pid: command line): in its cgroup or carrying its services' tag (not by
    their command lines: the cluster topology's name the single one's state folder, where the downloads are)."""
    group = platform_cgroup(STATE / "run")
    found = set(cgroup_members(group)) | set(tagged(tag_of(STATE / "run", ""), prefix=True))
    shown = {}
    for pid in living(sorted(found)):
        try:
            shown[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
        except OSError:
            continue
    return shown


def sweep() -> list[int]:
    """Stop supervisord, and kill whatever is left of any service of this platform (a process started by one, whose
    service is gone)."""
    supervisord.shutdown()
    group = platform_cgroup(STATE / "run")
    left = sorted(set(tagged(tag_of(STATE / "run", ""), prefix=True)) | set(cgroup_members(group)))
    kill_all(left, signal.SIGKILL)
    deadline = time.time() + 10
    while cgroup_members(group) and time.time() < deadline:
        time.sleep(0.1)
    remove_cgroup(group)
    return left


def wait_for(what: str, check, timeout: float, log: Path | None = None) -> None:
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # the service is still starting; remember why for the final message
            last = exc
        time.sleep(1)
    raise SystemExit(f"[platform] {what} did not come up within {timeout:.0f}s ({last!r}){log_tail(log)}")


def log_tail(log: Path | None, lines: int = 25) -> str:
    """The end of a service's log, for the message that says it failed: on-call reads why without opening a file."""
    if not (log and log.exists()):
        return ""
    tail = "\n  ".join(log.read_text(errors="replace").splitlines()[-lines:])
    return f"\n  last lines of {log}:\n  {tail}"
