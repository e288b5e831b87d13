"""The soak's faults, one per part of the stack. Each waits (briefly) for the moment it is meant for (a task running,
a stage running, a sensor deferred, a commit in flight), strikes, ends a deliberate outage after its time, and then
waits for the platform to be well again: the part back and healthy, and a batch committed after the fault ended.

Nothing here repairs anything: supervisord restarts what was killed, Airflow retries what failed; the soak only
undoes what it did itself (a partition, a full disk, a stopped Postgres)."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from local_platform import config
from local_platform import kafka as local_kafka
from local_platform.faults import cluster, full_disk, network_partition
from local_platform.faults.cluster import platform
from local_platform.faults.moments import (
    PRECONDITION_WAIT,
    await_moment,
    commit_in_flight,
    deferred_sensor,
    running_task_on,
    until,
)
from microingest.systems.postgres import connect, connection

RECOVERY_LIMIT = 600  # past this a fault counts as not survived without a person


@dataclass
class Fault:
    kind: str
    part: str  # what it strikes: faults on one part do not overlap
    detail: str = ""
    moment: str = ""  # what was going on when it struck
    at_moment: bool | None = None  # whether it struck at the moment it waits for (None: it waits for none)
    started: float = 0.0
    outage: float = 0.0  # how long a deliberate outage lasted (a partition, a full disk, a stopped Postgres)
    back_after: float | None = None  # from the end of the fault until its part was healthy (the next may strike it)
    recovered_after: float | None = None  # from the end of the fault until healthy and committing again
    not_recovered: str = ""  # why, when it did not recover within RECOVERY_LIMIT
    error: str = ""  # why it could not be struck (it then does not count, and its kind is tried again)
    retried: bool = False
    log: list[str] = field(default_factory=list)


class Soak:
    """What the faults need of the soak: the platform, the workload, and when a batch last committed."""

    def __init__(self, api, pg, kafka, topic: str, pipelines: list[str], tablespace, rnd: random.Random):
        self.api, self.pg, self.kafka, self.topic = api, pg, kafka, topic
        self.pipelines, self.tablespace, self.rnd = pipelines, tablespace, rnd

    def last_commit(self) -> float:
        try:
            with connection(self.pg) as conn, conn.cursor() as cur:
                cur.execute(
                    "SELECT extract(epoch FROM max(committed_at)) FROM microingest.batches WHERE pipeline = ANY(%s)",
                    (self.pipelines,),
                )
                return float(cur.fetchone()[0] or 0)
        except Exception:
            return 0.0


# --- the faults ---------------------------------------------------------------------------------------------------


def kill_service(
    service: str,
    healthy: Callable[[], object],
    moment: Callable[[object], object] | None = None,
    moment_name: str = "",
    wait: float = PRECONDITION_WAIT,
):
    def strike(soak: Soak, fault: Fault) -> Callable[[], bool]:
        if moment:
            await_moment(fault, moment_name, lambda: moment(soak.api), wait)
        old = cluster.kill9(service)
        fault.detail = f"kill -9 of {service} (pid {old})"
        return lambda: cluster.restarted(service, old) and bool(healthy())

    return strike


def kill_edge_worker(soak: Soak, fault: Fault) -> Callable[[], bool]:
    """The worker running an ingest task (either, when none does in time)."""
    worker = await_moment(fault, "ingest running", lambda: running_task_on(soak.api))
    if worker:
        fault.moment = f"ingest running on {worker}"
    worker = worker or soak.rnd.choice(cluster.EDGE_WORKERS)
    service = f"airflow-{worker}"
    old = cluster.kill9(service)
    fault.detail = f"kill -9 of {service} (pid {old})"
    return lambda: (
        cluster.restarted(service, old) and cluster.edge_worker_states(soak.api).get(worker) in ("idle", "running")
    )


def kill_spark_worker(soak: Soak, fault: Fault) -> Callable[[], bool]:
    await_moment(fault, "stage running", cluster.active_stages)
    service = soak.rnd.choice(cluster.SPARK_WORKERS)
    old = cluster.kill9(service)
    fault.detail = f"kill -9 of {service} (pid {old}) and so of its executors"
    return lambda: cluster.restarted(service, old) and cluster.alive_spark_workers() == 2


def kill_spark_submit_driver(soak: Soak, fault: Fault) -> Callable[[], bool]:
    drivers = await_moment(fault, "ingest running by spark-submit", cluster.spark_submit_drivers, PRECONDITION_WAIT * 3)
    if not drivers:
        fault.moment = "no spark-submit driver in time: nothing to kill"
        return lambda: True
    os.kill(drivers[0], signal.SIGKILL)
    fault.detail = f"kill -9 of the driver JVM (pid {drivers[0]})"
    return lambda: True  # Airflow retries the task; recovery is the next commit


def kill_partition_leader(soak: Soak, fault: Fault) -> Callable[[], bool]:
    await_moment(fault, "stage running", cluster.active_stages)
    partition = soak.rnd.randrange(3)
    leader = cluster.partition_leaders(soak.kafka, soak.topic)[partition]
    service = cluster.broker_service(leader)
    old = cluster.kill9(service)
    fault.detail = f"kill -9 of {service} (pid {old}), leader of {soak.topic}[{partition}]"
    return lambda: cluster.restarted(service, old) and cluster.fully_replicated(soak.kafka, soak.topic)


def restart_broker(soak: Soak, fault: Fault) -> Callable[[], bool]:
    node = soak.rnd.randrange(1, 4)
    started = time.monotonic()
    platform("restart", cluster.broker_service(node))
    fault.outage = time.monotonic() - started
    fault.detail = f"restart of {cluster.broker_service(node)} (a controlled shutdown, then a start)"
    return lambda: cluster.fully_replicated(soak.kafka, soak.topic)


def crash_postgres_in_commit(soak: Soak, fault: Fault) -> Callable[[], bool]:
    postmaster = cluster.postmaster_pid()
    # Postgres may still be coming back from an earlier fault: wait for a session to watch from, then for the moment;
    # without one in time it strikes anyway, as every fault does, and says so.
    conn = until(lambda: connect(soak.pg), 2 * PRECONDITION_WAIT, poll=1)
    if conn is None:
        await_moment(fault, "a transaction writing", lambda: False, 0)
        os.kill(postmaster, signal.SIGQUIT)
    else:
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                await_moment(fault, "a transaction writing", lambda: commit_in_flight(cur), 2 * PRECONDITION_WAIT, 0.02)
                # SIGQUIT is Postgres' immediate shutdown (no checkpoint, as a power cut); sent from here at once, so
                # the transaction seen is still open.
                os.kill(postmaster, signal.SIGQUIT)
        finally:
            conn.close()
    until(lambda: not cluster.listening(config.PG_PORT), 60, poll=0.2)
    platform("start", "postgres")
    fault.detail = "immediate shutdown (SIGQUIT to the postmaster), then a start (crash recovery)"
    return lambda: soak.last_commit() > 0


def stop_postgres_for_a_while(soak: Soak, fault: Fault) -> Callable[[], bool]:
    seconds = soak.rnd.uniform(15, 30)
    started = time.monotonic()
    platform("stop", "postgres")
    time.sleep(seconds)
    platform("start", "postgres")
    fault.outage = time.monotonic() - started
    fault.detail = f"Postgres stopped, refusing connections for {seconds:.0f}s"
    return lambda: soak.last_commit() > 0


def partition(name: str, services: list[str], ports: Callable[[], list[int]]):
    def strike(soak: Soak, fault: Fault) -> Callable[[], bool]:
        seconds = soak.rnd.uniform(20, 40)
        groups = [g for g in (cluster.service_cgroup(s) for s in services) if g]
        started = time.monotonic()
        network_partition.cut(groups, ports())
        time.sleep(seconds)
        fault.detail = f"{name} partitioned for {seconds:.0f}s ({network_partition.dropped()} packets dropped)"
        network_partition.heal()
        fault.outage = time.monotonic() - started
        return lambda: True

    return strike


def fill_tablespace(soak: Soak, fault: Fault) -> Callable[[], bool]:
    seconds = soak.rnd.uniform(20, 30)
    started = time.monotonic()
    size = soak.tablespace.fill()
    time.sleep(seconds)
    soak.tablespace.free()
    fault.outage = time.monotonic() - started
    fault.detail = f"the targets' tablespace full ({size // 2**20} MiB taken) for {seconds:.0f}s"
    return lambda: True


SPARK_SIDE = ["spark-connect", *cluster.SPARK_WORKERS]
DRIVERS = [f"airflow-{w}" for w in cluster.EDGE_WORKERS]  # Connect clients and spark-submit drivers run there


def kafka_ports() -> list[int]:
    return [local_kafka.port(n) for n in local_kafka.nodes()]


FAULTS: dict[str, tuple[str, Callable]] = {
    "scheduler killed": ("airflow-scheduler", kill_service("airflow-scheduler", cluster.scheduler_healthy)),
    "Airflow worker killed mid-task": ("edge-worker", kill_edge_worker),
    "triggerer killed, sensor deferred": (
        "airflow-triggerer",
        kill_service("airflow-triggerer", lambda: True, deferred_sensor, "sensor deferred", wait=150),
    ),  # see the gated pipeline
    "API server killed": ("airflow-api-server", kill_service("airflow-api-server", cluster.api_healthy)),
    "dag-processor killed": ("airflow-dag-processor", kill_service("airflow-dag-processor", lambda: True)),
    "Spark Connect server killed": (
        "spark-connect",
        kill_service(
            "spark-connect", lambda: cluster.listening(config.SPARK_CONNECT_PORT) and cluster.connect_app_url()
        ),
    ),
    "Spark worker killed mid-stage": ("spark-worker", kill_spark_worker),
    "spark-submit driver killed": ("spark-submit", kill_spark_submit_driver),
    "partition leader broker killed": ("kafka", kill_partition_leader),
    "broker restarted": ("kafka", restart_broker),
    "Postgres crashed mid-commit": ("postgres", crash_postgres_in_commit),
    "Postgres refusing connections": ("postgres", stop_postgres_for_a_while),
    "Spark cut off from Postgres": (
        "network",
        partition("Spark (drivers) and Postgres", DRIVERS + SPARK_SIDE, lambda: [config.PG_PORT]),
    ),
    "Spark cut off from Kafka": ("network", partition("Spark and Kafka", SPARK_SIDE, kafka_ports)),
    "target tablespace full": ("disk", fill_tablespace),
}


def unavailable_kinds() -> dict[str, str]:
    """The fault kinds this machine cannot inject, each with the reason (partitions need nftables, the full disk a
    tmpfs mount: root)."""
    left_out = {}
    if not network_partition.available():
        left_out.update({k: "nft is not installed (Debian's nftables)" for k, v in FAULTS.items() if v[0] == "network"})
    if not full_disk.available():
        left_out["target tablespace full"] = "mounting a small tablespace takes root and a local Postgres cluster"
    return left_out


def available_kinds() -> list[str]:
    """The fault kinds this machine can inject."""
    return [k for k in FAULTS if k not in unavailable_kinds()]


def run_fault(soak: Soak, kind: str, fault: Fault) -> None:
    """Strike, then wait until the part is healthy again (from then on the next fault may strike it) and a batch
    committed after the fault ended."""
    _, strike = FAULTS[kind]
    fault.started = time.time()
    try:
        healthy = strike(soak, fault)
    except Exception as exc:  # the fault could not be struck (its target gone meanwhile): say so, count it apart
        fault.error = f"not struck: {exc!r}"[:300]
        return
    ended = time.time()
    if not until(healthy, RECOVERY_LIMIT, poll=1):
        fault.not_recovered = f"{fault.part} not back and healthy after {RECOVERY_LIMIT}s"
        return
    fault.back_after = time.time() - ended
    left = RECOVERY_LIMIT - fault.back_after
    if until(lambda: healthy() and soak.last_commit() > ended, left, poll=1):
        fault.recovered_after = time.time() - ended
    else:
        fault.not_recovered = f"{fault.part} healthy, but no batch committed in the {RECOVERY_LIMIT}s after the fault"
