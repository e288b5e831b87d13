"""The local platform's supervisord: one per state folder, its socket, configuration and programs in STATE/run.

Every service is a program of its own, added when `up` starts it and removed when it is stopped, so `up` keeps its
order (Postgres, Kafka, then what needs them) and waits for each to be ready. supervisord restarts a program whenever
it exits; one that dies within START_SECONDS counts as a failed start, retried after 1, 2, 3, ... seconds, and after
START_RETRIES such failures in a row it is left FATAL (`make status` says so) rather than retried forever.
"""

from __future__ import annotations

import ctypes
import http.client
import shlex
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


_UNREACHABLE = (OSError, http.client.HTTPException, xmlrpc.client.ProtocolError)


def _server(run: Path = RUN) -> xmlrpc.client.ServerProxy:
    # The host is a placeholder: the transport talks to the socket.
    socket = f"unix://{run / SOCKET.name}"
    return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=SupervisorTransport(None, None, socket))


def running() -> bool:
    try:
        return _server().supervisor.getState()["statename"] == "RUNNING"
    except (*_UNREACHABLE, xmlrpc.client.Fault):
        return False


def _become_subreaper() -> None:
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def ensure_running(env: dict[str, str]) -> None:
    """Start this platform's supervisord if it is not running. Its own environment holds no credentials (each service
    gets its own from service_exec.py), only the platform's tag, so that `leftovers` finds it too."""
    if running():
        return
    if " " in str(RUN) or len(str(SOCKET)) > 100:  # supervisord's include list splits on spaces; sun_path is 108 bytes
        raise SystemExit(f"[platform] the state folder {STATE} must have no spaces and a path under 70 characters")
    _write_conf()
    with open(LOG, "ab") as out:
        process = subprocess.Popen(
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
        if process.poll() is not None or time.monotonic() > deadline:
            tail = "\n  ".join(LOG.read_text(errors="replace").splitlines()[-10:])
            raise SystemExit(f"[platform] supervisord did not start; the end of {LOG}:\n  {tail}")
        time.sleep(0.1)


def _program(name: str, log: Path, grace: float) -> str:
    command = [sys.executable, str(Path(__file__).with_name("service_exec.py")), name, str(RUN)]
    return f"""[program:{name}]
command={_escaped(shlex.join(command))}
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


_STOP_TRIES = 60  # half a second apart


def _ignoring(server_call, *codes: int) -> None:
    try:
        server_call()
    except xmlrpc.client.Fault as fault:
        if fault.faultCode not in codes:
            raise


def _stop_and_remove(server, name: str) -> None:
    """Stop the program, whatever its state, and remove it; again if autorestart started it in between, and after a
    pause while a stop begun elsewhere is still under way (stopProcess answers NOT_RUNNING for a program STOPPING)."""
    for _ in range(_STOP_TRIES):
        _ignoring(lambda: server.supervisor.stopProcess(name), Faults.NOT_RUNNING)
        try:
            server.supervisor.removeProcessGroup(name)
            return
        except xmlrpc.client.Fault as fault:
            if fault.faultCode != Faults.STILL_RUNNING:
                raise
        time.sleep(0.5)
    raise SystemExit(f"[platform] supervisord keeps {name} running: see {LOG}")


def start(name: str, log: Path, grace: float) -> None:
    """Add the service as a program (again, if its settings changed) and start it; one backing off after quick exits
    is started at once rather than after its delay."""
    (PROGRAMS / f"{name}.conf").write_text(_program(name, log, grace))
    server = _server()
    [[added, changed, _removed]] = server.supervisor.reloadConfig()
    if name in changed:
        _stop_and_remove(server, name)
    if name in added or name in changed:
        server.supervisor.addProcessGroup(name)
    if server.supervisor.getProcessInfo(name)["statename"] == "BACKOFF":
        _ignoring(lambda: server.supervisor.stopProcess(name), Faults.NOT_RUNNING)
    _ignoring(lambda: server.supervisor.startProcess(name, False), Faults.ALREADY_STARTED)


def info(name: str) -> dict | None:
    """What supervisord knows of the service (statename, pid, ...); None when it is no program of a running one."""
    try:
        return _server().supervisor.getProcessInfo(name)
    except (*_UNREACHABLE, xmlrpc.client.Fault):
        return None


def states() -> dict[str, str]:
    """Each program's state (RUNNING, BACKOFF, FATAL, ...); none when supervisord does not answer."""
    try:
        return {p["name"]: p["statename"] for p in _server().supervisor.getAllProcessInfo()}
    except (*_UNREACHABLE, xmlrpc.client.Fault):
        return {}


def pids(run: Path = RUN) -> tuple[int | None, set[int]]:
    """supervisord's pid and those of the programs it runs (none of either when it is not running)."""
    try:
        server = _server(run)
        return server.supervisor.getPID(), {p["pid"] for p in server.supervisor.getAllProcessInfo() if p["pid"]}
    except (*_UNREACHABLE, xmlrpc.client.Fault):
        return None, set()


def stop(name: str) -> bool:
    """Stop the service (SIGTERM to its process group, SIGKILL after its grace) and forget it; whether it was one of a
    running supervisord."""
    server = _server()
    try:
        server.supervisor.getProcessInfo(name)
    except _UNREACHABLE:
        known = False
    except xmlrpc.client.Fault as fault:
        if fault.faultCode != Faults.BAD_NAME:
            raise
        known = False
    else:
        _stop_and_remove(server, name)
        known = True
    (PROGRAMS / f"{name}.conf").unlink(missing_ok=True)
    return known


def shutdown() -> None:
    """Stop supervisord (after every service was stopped: it would stop what is left, without the sweep)."""
    try:
        pid = _server().supervisor.getPID()
        _server().supervisor.shutdown()
    except (*_UNREACHABLE, xmlrpc.client.Fault):
        return
    deadline = time.monotonic() + 60
    while living([pid]) and time.monotonic() < deadline:
        time.sleep(0.1)
