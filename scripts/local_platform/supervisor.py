"""Keeps one service of the local platform running, and owns everything it starts (what systemd's Restart=always and
KillMode=control-group do for a unit).

    supervisor.py --name NAME --run-dir DIR [--cgroup PATH] [--grace SECONDS] -- ARGV...

The service runs in a process group and, given --cgroup, a cgroup v2 group of its own, with
MICROINGEST_SERVICE=<run dir>::<name> in its environment (process_tree.py: how every process it starts is found, even
one that leaves the group, as a scheduler's LocalExecutor workers do). When the service exits, however it exits,
whatever is left of that tree is killed and the service is started again (after 1 s, doubling to 30 s while it keeps
dying young). SIGTERM stops it: SIGTERM to the tree, SIGKILL to what is left after the grace, then the supervisor
exits. Its pid is in DIR/NAME.supervisor.pid, the
service's current pid in DIR/NAME.pid.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from local_platform.process_tree import (
    TAG,
    cgroup_members,
    descendants,
    kill_all,
    living,
    remove_cgroup,
    tag_of,
    tagged,
)

_PR_SET_CHILD_SUBREAPER = 36
_stopping = False


def _say(name: str, msg: str) -> None:
    print(f"[{datetime.now().isoformat(timespec='seconds')}] supervisor of {name}: {msg}", flush=True)


def _on_stop(signum, frame) -> None:
    global _stopping
    _stopping = True


def _reap(child: subprocess.Popen) -> bool:
    """Collect every exited process handed to us (orphans of the tree come here as we are their subreaper); True
    once the service itself has exited."""
    exited = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return exited or child.returncode is not None
        if pid == 0:
            return exited
        if pid == child.pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            exited = True


def _tree(tag: str, group: Path | None) -> list[int]:
    """What is left of the service's tree (process_tree.py)."""
    return sorted((set(cgroup_members(group)) | set(descendants(os.getpid())) | set(tagged(tag))) - {os.getpid()})


def _end_tree(name: str, tag: str, group: Path | None, grace: float) -> None:
    """SIGTERM to what is left of the service's tree, SIGKILL to what outlives the grace."""
    left = _tree(tag, group)
    if not left:
        return
    kill_all(left, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and living(_tree(tag, group)):
        time.sleep(0.2)
        _reap_quietly()
    left = living(_tree(tag, group))
    if left:
        _say(name, f"SIGKILL to {len(left)} process(es) still alive after {grace:.0f}s: {left}")
        kill_all(left, signal.SIGKILL)
        while living(_tree(tag, group)):
            time.sleep(0.1)
            _reap_quietly()
    _reap_quietly()


def _reap_quietly() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _describe(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


def _joining(group: Path | None):
    """What the child runs before exec: join the service's cgroup, so that all it starts is in there too."""
    if group is None:
        return None
    procs = str(group / "cgroup.procs")

    def join() -> None:
        with open(procs, "w") as f:
            f.write("0")

    return join


def supervise(name: str, run_dir: Path, grace: float, argv: list[str], group: Path | None = None) -> None:
    tag = tag_of(run_dir, name)
    if group is not None:
        group.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, TAG: tag}
    pid_path, own_path = run_dir / f"{name}.pid", run_dir / f"{name}.supervisor.pid"
    run_dir.mkdir(parents=True, exist_ok=True)
    own_path.write_text(str(os.getpid()))
    ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_stop)
    backoff = 0.5  # doubled before its first use
    try:
        while not _stopping:
            started = time.monotonic()
            child = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, process_group=0, preexec_fn=_joining(group)
            )
            pid_path.write_text(str(child.pid))
            _say(name, f"started pid {child.pid}")
            while not _stopping and not _reap(child):
                time.sleep(0.2)
            if _stopping:
                break
            lived = time.monotonic() - started
            backoff = 1.0 if lived > 60 else min(backoff * 2, 30.0)
            _say(
                name,
                f"pid {child.pid} {_describe(child.returncode)} after {lived:.0f}s; ending what is left of "
                f"its tree, restarting in {backoff:.0f}s",
            )
            _end_tree(name, tag, group, grace=5)
            deadline = time.monotonic() + backoff
            while not _stopping and time.monotonic() < deadline:
                time.sleep(0.2)
                _reap_quietly()
    finally:
        _say(name, "stopping")
        _end_tree(name, tag, group, grace)
        remove_cgroup(group)
        pid_path.unlink(missing_ok=True)
        own_path.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--grace", type=float, default=30)
    parser.add_argument("--cgroup", type=Path, help="a cgroup v2 group of the service's own, made if missing")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        parser.error("no command to supervise")
    supervise(args.name, args.run_dir, args.grace, argv, args.cgroup)


if __name__ == "__main__":
    sys.exit(main())
