"""A Spark Connect job started by the job-forks server (`spark.job_fork_server`): the task's half, and what both halves
agree on.

Most of a small job's start is imports: pyspark's Connect client (with pandas and grpc), kafka-python, the package;
about 1.3 s of the 2.7 s a 100-record job takes alone. The server has done them once. Each job is a fork of it that
runs the job's script (`settings.spark_job_path`) with the task's arguments, environment and working directory, and
writes its output to a pipe the task reads, as a job the task spawns itself would.

The task and the server talk over a Unix socket only their user can open: a request carries the job's environment,
credentials included, which must never reach a command line. The job's process group is its own, so the task stops it
with the same signals as a spawned one; when the task's end of the socket closes (the task was killed outright), the
server stops the job.

A server that runs other code than the task's (started before an upgrade, or with another interpreter or job script)
refuses the request, as does one that is not there: the task then spawns the job as a new interpreter.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from microingest import settings

STOP_GRACE_SECONDS = 30.0  # SIGTERM, then SIGKILL: the same grace a task gives a job it spawned


# Read once, when an interpreter or a module starts: a forked job keeps the server's, so they must be the task's too.
READ_AT_START = (
    *("PYTHONPATH", "PYTHONHASHSEED", "PYTHONWARNINGS", "LANG", "LC_ALL", "LC_CTYPE"),
    "SPARK_CONNECT_LOG_LEVEL",
)


@functools.cache
def fingerprint() -> str:
    """What the job would run: the interpreter, the installed distributions, the package's sources, the job's script
    and the settings read at start. The server forks only for a task whose fingerprint is its own (and while the
    modules it imported are unchanged on disk: `imported_files`)."""
    digest = hashlib.blake2b(digest_size=16)
    # The environment's prefix, not the interpreter's path: a venv's python and python3 are the same interpreter.
    digest.update(f"{sys.prefix}\0{sys.version}\0".encode())
    for entry in distributions():
        digest.update(f"\0{entry}".encode())
    digest.update(repr([os.environ.get(name) for name in READ_AT_START]).encode())
    package = Path(settings.__file__).parent
    script = settings.spark_job_path()
    for path in [*sorted(package.rglob("*.py")), script]:
        digest.update(f"\0{path}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def distributions() -> list[str]:
    """Every distribution importlib.metadata would find on sys.path (the virtualenv's, a `pip install --user`'s, those
    in PYTHONPATH and .pth folders, .dist-info and .egg-info alike), each as its folder and that folder's
    modification time and inode: a reinstall of the same version makes the folder anew. From the folders' names and
    a stat each: reading every METADATA file would cost a task a third of a second."""
    found = []
    for entry in dict.fromkeys(sys.path):
        try:
            names = sorted(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info")))
        except OSError:  # a zip, a folder that is not there
            continue
        for name in names:
            try:
                stat = os.stat(os.path.join(entry or ".", name))
            except OSError:
                continue
            found.append(f"{entry}/{name}:{stat.st_mtime_ns}:{stat.st_ino}")
    return sorted(found)  # the order of sys.path is PYTHONPATH's (READ_AT_START) and the interpreter's


FileStamp = tuple[int, int, int]  # modification time, size, inode


def imported_files() -> dict[str, FileStamp]:
    """The file of every module imported so far, as it is on disk now."""
    files: dict[str, FileStamp] = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path not in files:
            try:
                stat = os.stat(path)
            except OSError:
                continue
            files[path] = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    return files


def changed_files(stamps: dict[str, FileStamp]) -> list[str]:
    """The files of `stamps` that changed on disk since, or went."""
    changed = []
    for path, stamp in stamps.items():
        try:
            stat = os.stat(path)
        except OSError:
            changed.append(path)
            continue
        if (stat.st_mtime_ns, stat.st_size, stat.st_ino) != stamp:
            changed.append(path)
    return changed


def send_message(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


@dataclass
class Lines:
    """JSON messages, one per line, read from a socket with a deadline (a socket file object cannot time out and
    be read again)."""

    sock: socket.socket
    buffer: bytes = b""

    def next(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None when the timeout passed first. Raises EOFError when the other end closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            self.sock.settimeout(None if deadline is None else max(deadline - time.monotonic(), 0.001))
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                return None
            if not chunk:
                raise EOFError
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)


@dataclass
class ForkedJob:
    """A job the server forked; `pid` leads the job's own process group."""

    pid: int
    sock: socket.socket
    lines: Lines
    code: int | None = field(default=None)

    def wait(self, timeout: float | None = None) -> int | None:
        """The job's exit code (negative: the signal that ended it); None when `timeout` passed first. Raises
        ConnectionError when the server went away before the job ended."""
        while self.code is None:
            try:
                message = self.lines.next(timeout)
            except (EOFError, OSError):
                if self.code is not None:  # read by another wait: a stop, from a signal handler or another thread
                    break
                raise ConnectionError(f"the job-forks server went away before job {self.pid} ended") from None
            if message is None:
                return None
            if "exit" in message:
                self.code = int(message["exit"])
        return self.code

    def close(self) -> None:
        self.sock.close()


def start(path: Path, argv: list[str], env: dict[str, str], cwd: str, output_fd: int) -> ForkedJob | str:
    """Ask the server at `path` to start the job (`argv`: the interpreter, the job's script, its arguments) with `env`
    and `cwd`, its output written to `output_fd`. The job, or why the server did not start it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10)
        sock.connect(str(path))
        # The request carries the job's credentials: only to a server of this user.
        _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid != os.getuid():
            sock.close()
            return f"the job-forks server at {path} runs as another user (uid {uid})"
        socket.send_fds(sock, [b"J"], [output_fd])
        send_message(sock, {"fingerprint": fingerprint(), "argv": argv, "env": env, "cwd": cwd})
        lines = Lines(sock)
        answer = lines.next(timeout=30)
    except (OSError, EOFError, ValueError) as exc:  # ValueError: an answer that is not JSON
        sock.close()
        return f"no job-forks server answers at {path} ({type(exc).__name__}: {exc})"
    if answer is None or "pid" not in answer:
        sock.close()
        reason = "no answer in 30 s" if answer is None else answer.get("refused", answer)
        return f"the job-forks server at {path} did not start the job: {reason}"
    return ForkedJob(int(answer["pid"]), sock, lines)


def answers(path: Path) -> bool:
    """The server accepts connections at `path`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        return sock.connect_ex(str(path)) == 0
