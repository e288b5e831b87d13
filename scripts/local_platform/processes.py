"""Background processes of the local platform: pid files, start, stop, wait until ready."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from local_platform.config import REPO, STATE
from local_platform.process_tree import cgroup_members, kill_all, living, platform_cgroup, remove_cgroup, tag_of, tagged

_CREDENTIAL = re.compile(r"PASSWORD|SECRET|TOKEN|JWT|FERNET", re.I)


def without_credentials(environ) -> dict[str, str]:
    """An environment for a service that needs none of the platform's credentials: nothing of Airflow's (its
    connections, its config: JWT and API secrets, the fernet key, the metadata database URL with its password) nor
    anything named like a secret."""
    return {k: v for k, v in environ.items() if not k.startswith("AIRFLOW") and not _CREDENTIAL.search(k)}


def say(msg: str) -> None:
    print(f"[platform] {msg}", flush=True)


def pid_file(name: str) -> Path:
    return STATE / "run" / f"{name}.pid"


def running_pid(name: str) -> int | None:
    try:
        pid = int(pid_file(name).read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None


def supervisor_pid(name: str) -> int | None:
    try:
        pid = int(supervisor_file(name).read_text())
        os.kill(pid, 0)
        return pid
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None


def supervisor_file(name: str) -> Path:
    return STATE / "run" / f"{name}.supervisor.pid"


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str], grace: float = 30) -> int:
    """Start a service under a supervisor of its own (local_platform/supervisor.py), which restarts it whenever it
    dies and owns every process it starts; the service's pid once it runs."""
    if supervisor_pid(name) or running_pid(name):  # the latter: started before services had supervisors
        pid = running_pid(name)
        say(f"{name} already running (pid {pid or 'restarting'})")
        return pid or 0
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    pid_file(name).unlink(missing_ok=True)
    run_dir = pid_file(name).parent
    group = platform_cgroup(run_dir)
    supervisor = [
        sys.executable,
        str(Path(__file__).with_name("supervisor.py")),
        "--name",
        name,
        "--run-dir",
        str(run_dir),
        "--grace",
        str(grace),
        *(["--cgroup", str(group / name)] if group else []),
        "--",
        *argv,
    ]
    with open(log, "ab") as out:
        subprocess.Popen(
            supervisor,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
    deadline = time.time() + 10
    while not running_pid(name) and time.time() < deadline:
        time.sleep(0.05)
    pid = running_pid(name)
    if not pid:
        raise SystemExit(f"[platform] {name} did not start; see {log}")
    say(f"started {name} (pid {pid}, log {log})")
    return pid


def stop(name: str, timeout: float = 60) -> None:
    """Stop a service and everything it started: its supervisor ends the whole tree."""
    supervisor, unsupervised = supervisor_pid(name), running_pid(name)
    if supervisor:
        os.kill(supervisor, signal.SIGTERM)
        deadline = time.time() + timeout
        while time.time() < deadline and supervisor_pid(name):
            time.sleep(0.2)
        if supervisor_pid(name):
            os.kill(supervisor, signal.SIGKILL)
    elif unsupervised:  # started before services had supervisors
        os.killpg(unsupervised, signal.SIGKILL)
    group = platform_cgroup(pid_file(name).parent)
    left = sorted(set(tagged(tag_of(pid_file(name).parent, name))) | set(cgroup_members(group and group / name)))
    kill_all(left, signal.SIGKILL)
    remove_cgroup(group and group / name)
    pid_file(name).unlink(missing_ok=True)
    supervisor_file(name).unlink(missing_ok=True)
    if supervisor or unsupervised or left:
        say(f"stopped {name}")


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
    """Kill whatever is left of any service of this platform (a process started by one, whose service is gone)."""
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
    tail = ""
    if log and log.exists():
        tail = "\n  ".join(log.read_text(errors="replace").splitlines()[-25:])
        tail = f"\n  last lines of {log}:\n  {tail}"
    raise SystemExit(f"[platform] {what} did not come up within {timeout:.0f}s ({last!r}){tail}")
