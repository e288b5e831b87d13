"""Named fault points for fault-injection tests (the chaos suite). Unset, as in production, they do nothing.

Points: after_open (a batch's target checked, before its read), after_decode (the batch decoded and held by the driver,
before the commit), before_commit (inside the commit transaction, everything written but not committed), after_commit
(a batch committed, before the next batch of the run or the job's outcome), executor_after_decode (on an executor, its
Spark partition decoded in Python, before its task ends; on the JVM path, a task's first record decoded: the JVM
decoder's `Faults`, where any action but pause halts the executor's JVM).

MICROINGEST_FAULT=<point>                the process reaching that point kills itself with SIGKILL: no cleanup, no
                                         exception handlers, like an OOM kill or a lost machine.
MICROINGEST_FAULT=<point>:pause:<file>   the process creates <file> and waits (up to 10 min) until it is removed,
                                         so a test can break something (restart Postgres, stop the broker) right there,
                                         or hold several jobs there and release them together.
MICROINGEST_FAULT=<point>:executor      (on a Spark executor) kill -9 the executor JVM that runs this Python
                                         worker: an executor lost, as when its machine dies.
MICROINGEST_FAULT=jvm_self_check:corrupt  the driver changes the first text field of every record the JVM decoded,
                                         before its self-check (`spark.jvm_collected`), as a wrong decoder would.
MICROINGEST_FAULT_ONCE=<file>            arm the fault only while <file> does not exist, and create it when firing,
                                         so a retried attempt runs clean.

An executor point set in the job's own environment travels to the executors inside the function they run
(`executor_faults`): a Spark Connect server's executors do not share the job's environment.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

# A bound only for a test that never releases its job; three racers held on two busy cores take minutes to gather.
PAUSE_LIMIT_SECONDS = 600


def executor_faults() -> dict[str, str]:
    """The job's fault settings when they name an executor point (else none), to be pickled to the executors."""
    if not os.environ.get("MICROINGEST_FAULT", "").startswith("executor_"):
        return {}
    return {k: os.environ[k] for k in ("MICROINGEST_FAULT", "MICROINGEST_FAULT_ONCE") if k in os.environ}


def corrupts(name: str) -> bool:
    """Whether the fault set asks the code at `name` to corrupt its data (`<name>:corrupt`)."""
    return os.environ.get("MICROINGEST_FAULT", "") == f"{name}:corrupt" and _armed(os.environ)


def _armed(env: Mapping[str, str]) -> bool:
    once = env.get("MICROINGEST_FAULT_ONCE")
    if not once:
        return True
    if Path(once).exists():
        return False
    Path(once).touch()
    return True


def crash_point(name: str, carried: Mapping[str, str] | None = None) -> None:
    """Fire the fault set for `name`, by the settings `carried` from the job when there are any, else this
    process's environment."""
    env = carried or os.environ
    spec = env.get("MICROINGEST_FAULT", "")
    point, _, action = spec.partition(":")
    if point != name:
        return
    if not _armed(env):
        return
    if action.startswith("pause:"):
        marker = Path(action.removeprefix("pause:"))
        marker.touch()
        deadline = time.time() + PAUSE_LIMIT_SECONDS
        while marker.exists() and time.time() < deadline:
            time.sleep(0.2)
        return
    if action == "executor":
        os.kill(_parent_of(os.getppid()), signal.SIGKILL)  # worker -> pyspark daemon -> executor JVM
        return
    os.kill(os.getpid(), signal.SIGKILL)


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])
