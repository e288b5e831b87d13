"""The moments the soak's faults wait for before they strike: a task running on an Airflow worker, a sensor deferred,
a transaction writing. A fault that finds no such moment in time strikes anyway and says so."""

from __future__ import annotations

import time
from collections.abc import Callable

from local_platform.faults import cluster

PRECONDITION_WAIT = 30  # seconds a fault waits for its moment before striking anyway (and saying so)


def until(check: Callable[[], object], timeout: float, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception:
            pass
        time.sleep(poll)
    return None


def await_moment(fault, name: str, check: Callable[[], object], wait: float = PRECONDITION_WAIT, poll: float = 0.5):
    """Wait (up to `wait` seconds) for the fault's moment; note on the fault whether it came. Returns what `check`
    found, or None."""
    found = until(check, wait, poll)
    fault.at_moment = bool(found)
    fault.moment = name if found else f"no {name} in time: struck anyway"
    return found


def running_task_on(api, task_id: str = "ingest") -> str | None:
    """The Edge worker running a task of that id now, if one is."""
    for ti in cluster.task_instances(api, "running"):
        if ti["task_id"] == task_id and ti.get("hostname") in cluster.EDGE_WORKERS:
            return ti["hostname"]
    return None


def deferred_sensor(api) -> bool:
    return bool(cluster.task_instances(api, "deferred"))


def commit_in_flight(cur) -> bool:
    """A transaction of the pipelines' database that has written (a batch's COPY, its inserts, the ledger) and not
    yet committed."""
    cur.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction') "
        "AND query ~* '^\\s*(copy|insert|update|delete|with)'"
    )
    return cur.fetchone()[0] > 0
