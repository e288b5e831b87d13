"""Background processes of the local platform: pid files, start, stop, wait until ready."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from local_platform.config import REPO, STATE


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


def spawn(name: str, argv: list[str], log: Path, env: dict[str, str]) -> int:
    pid = running_pid(name)
    if pid:
        say(f"{name} already running (pid {pid})")
        return pid
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_file(name).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=REPO, start_new_session=True)
    pid_file(name).write_text(str(proc.pid))
    say(f"started {name} (pid {proc.pid}, log {log})")
    return proc.pid


def stop(name: str, timeout: float = 30) -> None:
    pid = running_pid(name)
    if not pid:
        pid_file(name).unlink(missing_ok=True)
        return
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.time() + timeout
    while time.time() < deadline and running_pid(name):
        time.sleep(0.3)
    if running_pid(name):
        os.killpg(pid, signal.SIGKILL)
    pid_file(name).unlink(missing_ok=True)
    say(f"stopped {name}")


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

