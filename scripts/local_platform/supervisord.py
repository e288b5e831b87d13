"""The local platform's supervisord: one per state folder, its socket, configuration and programs in STATE/run.

Every service is a program of its own, added when `up` starts it and removed when it is stopped, so `up` keeps its
order (Postgres, Kafka, then what needs them) and waits for each to be ready. supervisord restarts a program whenever
it exits; one that dies within START_SECONDS counts as a failed start, retried after 1, 2, 3, ... seconds, and after
START_RETRIES such failures in a row it is left FATAL (`make status` says so) rather than retried forever.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path

from supervisor.xmlrpc import Faults, SupervisorTransport

from local_platform.config import REPO, STATE, VENV_BIN
from local_platform.process_tree import TAG, living, tag_of

RUN = STATE / "run"
CONF, SOCKET, PROGRAMS = RUN / "supervisord.conf", RUN / "supervisord.sock", RUN / "programs"
LOG = STATE / "supervisord.log"
START_SECONDS = 5
START_RETRIES = 60  # about half an hour of dying at once before it is given up on
RUNNING_STATES = ("STARTING", "RUNNING")
_PR_SET_CHILD_SUBREAPER = 36


def _escaped(value: object) -> str:
    return str(value).replace("%", "%%")  # supervisord expands %(name)s in every value


def _write_conf() -> None:
    RUN.mkdir(parents=True, exist_ok=True)
    PROGRAMS.mkdir(exist_ok=True)
    CONF.write_text(
        f"""[unix_http_server]
file={_escaped(SOCKET)}
chmod=0700

[supervisord]
logfile={_escaped(LOG)}
pidfile={_escaped(RUN / "supervisord.pid")}
childlogdir={_escaped(RUN)}
silent=true

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{_escaped(SOCKET)}

[include]
files = {_escaped(PROGRAMS)}/*.conf
"""
    )


def _server() -> xmlrpc.client.ServerProxy:
    # The host is a placeholder: the transport talks to the socket.
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=SupervisorTransport(None, None, f"unix://{SOCKET}"))


def running() -> bool:
    try:
        return _server().supervisor.getState()["statename"] == "RUNNING"
    except (OSError, xmlrpc.client.Error):
        return False


def _become_subreaper() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def ensure_running(env: dict[str, str]) -> None:
    """Start this platform's supervisord if it is not running. Its own environment holds no credentials (each service
    gets its own from service_exec.py), only the platform's tag, so that `leftovers` finds it too."""
    if running():
        return
    _write_conf()
    with open(LOG, "ab") as out:
        subprocess.Popen(
            [str(VENV_BIN / "supervisord"), "--nodaemon", "--configuration", str(CONF)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**env, TAG: tag_of(RUN, "supervisord")},
            cwd=REPO,
            start_new_session=True,
            preexec_fn=_become_subreaper,  # kept through exec: orphans of every service come to supervisord
        )
    deadline = time.monotonic() + 30
    while not running():
        if time.monotonic() > deadline:
            raise SystemExit(f"[platform] supervisord did not start; see {LOG}")
        time.sleep(0.1)


def _program(name: str, log: Path, grace: float) -> str:
    command = [sys.executable, str(Path(__file__).with_name("service_exec.py")), name, str(RUN)]
    return f"""[program:{name}]
command={_escaped(" ".join(command))}
directory={_escaped(REPO)}
autostart=false
autorestart=true
startsecs={START_SECONDS}
startretries={START_RETRIES}
stopsignal=TERM
stopwaitsecs={grace:.0f}
stopasgroup=true
killasgroup=true
redirect_stderr=true
stdout_logfile={_escaped(log)}
stdout_logfile_maxbytes=0
"""


def start(name: str, log: Path, grace: float) -> None:
    """Add the service as a program (again, if its settings changed) and start it."""
    (PROGRAMS / f"{name}.conf").write_text(_program(name, log, grace))
    server = _server()
    [[added, changed, _removed]] = server.supervisor.reloadConfig()
    if name in changed:  # not running, or spawn() would not start it; but maybe still starting or backing off
        try:
            server.supervisor.stopProcess(name)
        except xmlrpc.client.Fault as fault:
            if fault.faultCode != Faults.NOT_RUNNING:
                raise
        server.supervisor.removeProcessGroup(name)
    if name in added or name in changed:
        server.supervisor.addProcessGroup(name)
    try:
        server.supervisor.startProcess(name, False)
    except xmlrpc.client.Fault as fault:
        if fault.faultCode != Faults.ALREADY_STARTED:  # backing off after quick exits: it tries again by itself
            raise


def info(name: str) -> dict | None:
    """What supervisord knows of the service (statename, pid, ...); None when it is no program of a running one."""
    try:
        return _server().supervisor.getProcessInfo(name)
    except (OSError, xmlrpc.client.Error):
        return None


def pids() -> tuple[int | None, set[int]]:
    """supervisord's pid and those of the programs it runs (none of either when it is not running)."""
    try:
        server = _server()
        return server.supervisor.getPID(), {p["pid"] for p in server.supervisor.getAllProcessInfo() if p["pid"]}
    except (OSError, xmlrpc.client.Error):
        return None, set()


def stop(name: str) -> bool:
    """Stop the service (SIGTERM to its process group, SIGKILL after its grace) and forget it; whether it was one."""
    server = _server()
    try:
        if server.supervisor.getProcessInfo(name)["statename"] in (*RUNNING_STATES, "BACKOFF"):
            server.supervisor.stopProcess(name)
        server.supervisor.removeProcessGroup(name)
    except (OSError, xmlrpc.client.Error):
        return False
    finally:
        (PROGRAMS / f"{name}.conf").unlink(missing_ok=True)
    return True


def shutdown() -> None:
    """Stop supervisord (after every service was stopped: it would stop what is left, without the sweep)."""
    try:
        pid = _server().supervisor.getPID()
        _server().supervisor.shutdown()
    except (OSError, xmlrpc.client.Error):
        return
    deadline = time.monotonic() + 60
    while living([pid]) and time.monotonic() < deadline:
        time.sleep(0.1)
