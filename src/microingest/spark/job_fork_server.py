"""The job-forks server: Spark Connect jobs started with their imports already done (`spark.job_forks` has the why).

`python -m microingest.spark.job_fork_server [--socket PATH]` imports what the job's script imports, then forks once
per request: a watcher that answers the task, and under it the job, which runs the script as a spawned job would (its
own session and process group, the task's environment, working directory and arguments, stdin from /dev/null,
stdout and stderr to the task's pipe). The watcher reports the job's exit code, and stops the job when the task's end
of the socket closes.

Forking is safe only from a process with one thread: the server keeps OpenBLAS and the jemalloc Arrow loads from
starting theirs, and refuses every request, so that tasks spawn their jobs, if any thread is there all the same.
"""

from __future__ import annotations

import argparse
import ast
import atexit
import importlib
import io
import json
import logging
import os
import runpy
import select
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import setproctitle

from microingest import settings
from microingest.spark.job_forks import (
    STOP_GRACE_SECONDS,
    FileStamp,
    changed_files,
    fingerprint,
    imported_files,
    send_message,
)

log = logging.getLogger("microingest.job_forks")

# Imported by the job only once it runs (the Connect client by SparkSession.builder.remote, the decoders' halves and
# the consumer-group mirror inside functions); the script's own imports are read from the script.
IMPORTED_LATER = (
    "pyspark.sql.connect.session",
    "microingest.spark.jvm_decode",
    "microingest.spark.jvm_collected",
    "microingest.lag.mirror",
    "pgpq",
)
# Set before those imports: a thread the server has when it forks would be missing, locks and all, from the job.
NO_THREADS = {"OPENBLAS_NUM_THREADS": "1", "JE_ARROW_MALLOC_CONF": "background_thread:false"}


def script_imports(script: Path) -> list[str]:
    """The absolute imports at the top level of the job's script."""
    names: list[str] = []
    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module != "__future__":
            names.append(node.module)
    return names


def threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _refusal() -> str | None:
    """Why this server cannot fork jobs safely, if it cannot."""
    if threads() != 1:
        return f"the server has {threads()} threads, and a fork would lose all but one"
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError as exc:  # a kernel before 5.3, or a sandbox: the watcher could not follow its job
        return f"this system gives no pidfd ({exc})"
    return None


def serve(path: Path) -> None:
    """Preload, then answer requests at `path` until SIGTERM."""
    for name, value in NO_THREADS.items():
        os.environ.setdefault(name, value)
    script = settings.spark_job_path()  # the one script the server runs, and what its fingerprint covers
    for name in [*script_imports(script), *IMPORTED_LATER]:
        importlib.import_module(name)
    mark = fingerprint()
    stamps = imported_files()  # a fork would run these modules as they were when imported, whatever the disk says now
    setproctitle.getproctitle()  # its set-up reads the environment, which a job's process replaces before its title
    refusal = _refusal()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.unlink(missing_ok=True)  # a socket left by a server that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_mask)
    listener.listen(64)
    bound = path.stat().st_ino
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # watchers are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log.info("serving at %s (code %s)%s", path, mark, f"; refusing: {refusal}" if refusal else "")
    try:
        while True:
            conn, _ = listener.accept()
            # Held until the watcher has its own SIGTERM: the server's would unwind into the serving loop's finally.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                _exit_after(_watch, conn, script, mark, refusal, stamps)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            conn.close()
    finally:
        listener.close()
        if path.exists() and path.stat().st_ino == bound:  # not a successor's socket
            path.unlink()


def _exit_after(body: Callable[..., int | None], *args: Any) -> None:
    """Run a forked child's body and end the child there: it must never return into its parent's frames."""
    code = 0
    try:
        code = body(*args) or 0
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        os._exit(code)


def _watch(conn: socket.socket, script: Path, mark: str, refusal: str | None, stamps: dict[str, FileStamp]) -> None:
    """One request: start the job, report its pid and exit code, stop it when the task goes away first."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    conn.settimeout(10)
    _, fds, _, _ = socket.recv_fds(conn, 1, 1)
    if not fds:  # a probe (`job_forks.answers`), or a task gone before it asked
        return
    request = _request(conn)
    if not refusal and request["fingerprint"] != mark:
        refusal = "it runs other code than the task (started before an upgrade?)"
    if not refusal and request["argv"][1:2] != [str(script)]:
        refusal = f"it runs only {script}"
    if not refusal and (changed := changed_files(stamps)):
        refusal = (
            f"{len(changed)} module file(s) it imported changed on disk since it started ({changed[0]}); "
            "`make up` brings it up to date"
        )
    if refusal:
        os.close(fds[0])
        send_message(conn, {"refused": refusal})
        return
    go_read, go_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(go_write)
        _exit_after(_run_job, script, request, fds[0], conn, go_read)
    os.close(go_read)
    os.close(fds[0])
    job = os.pidfd_open(pid)
    try:
        send_message(conn, {"pid": pid})
        os.write(go_write, b"g")  # the task knows whom to stop: the job may begin
    except BaseException:
        _stop(pid, job)  # never begun: it finds its go pipe closed
        raise
    finally:
        os.close(go_write)
    log.info("started job %d", pid)
    try:
        _follow(conn, pid, job)
    except BaseException:
        _stop(pid, job)
        raise


def _follow(conn: socket.socket, pid: int, job: int) -> None:
    """Report the job's exit code, or stop the job when the task goes away first."""
    conn.settimeout(None)
    while True:
        ready, _, _ = select.select([conn.fileno(), job], [], [])
        if job in ready:
            _, status = os.waitpid(pid, 0)
            send_message(conn, {"exit": os.waitstatus_to_exitcode(status)})
            return
        if not conn.recv(4096):  # the task is gone
            log.warning("the task of job %d went away; stopping the job", pid)
            _stop(pid, job)
            return


def _request(conn: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            raise EOFError("the request ended early")
        data += chunk
    return json.loads(data)


def _stop(pid: int, job: int) -> None:
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_SECONDS), (signal.SIGKILL, None)):
        for target in (os.killpg, os.kill):  # the group, or the job alone before it made its own
            try:
                target(pid, sig)
                break
            except ProcessLookupError:
                continue
        if select.select([job], [], [], wait)[0]:
            break
    os.waitpid(pid, 0)


def _run_job(script: Path, request: dict[str, Any], output: int, conn: socket.socket, go: int) -> int:
    """In the job's process: become what a spawned job would be, then run the script."""
    os.setsid()
    conn.close()
    if os.read(go, 1) != b"g":  # the watcher could not tell the task this job's pid
        return 1
    os.close(go)
    devnull = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((devnull, 0), (output, 1), (output, 2)):
        os.dup2(fd, target)
    os.close(devnull)
    os.close(output)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True, errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True, errors="backslashreplace")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    logging.getLogger().handlers.clear()  # the job configures its own logging, as in a fresh interpreter
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.argv = request["argv"][1:]
    setproctitle.setproctitle(" ".join(request["argv"]))  # what `ps` shows of a spawned job: no secret
    sys.path[0] = str(script.parent)  # as for a script the interpreter runs: its folder first
    code: Any = 0
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # an interpreter dies of the SIGINT it did not handle
        traceback.print_exc()
        _finalize(0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    return _finalize(code)


def _finalize(code: Any) -> int:
    """What an interpreter does at its end, in its order: stop thread pools and wait for the threads that are not
    daemons (an executor never shut down would otherwise keep the job, and the task reading its output, waiting),
    run the atexit hooks the job's modules registered, flush. Its exit code as the interpreter would make it."""
    threading._shutdown()  # type: ignore[attr-defined]  # the interpreter's own step, as multiprocessing takes it
    atexit._run_exitfuncs()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code & 0xFF


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m microingest.spark.job_fork_server", description=__doc__)
    parser.add_argument("--socket", type=Path, default=settings.job_forks_socket())
    args = parser.parse_args(argv)
    if args.socket is None:
        parser.error("MICROINGEST_JOB_FORKS is off and no --socket was given")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    serve(args.socket)


if __name__ == "__main__":
    main()
