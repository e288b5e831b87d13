"""Chaos: faults injected across many batches while a producer keeps writing; in the end every sink mode holds
exactly what Kafka holds — none lost, none duplicated.

Four pipelines (append, append into a table without a key, upsert_latest, aggregate) read the same topic, each with its
own ledger, and a fifth appends that topic and a second one (`topics:`), with a producer of its own on the second.
Each round plans a batch for one of them and breaks it with the next fault kind, in a fixed order. One test kills:
a self-kill at a fault point (before the read, after decoding, inside the commit transaction), and kill -9 of the
whole Spark job at a random moment (reading, decoding or committing). The other restarts what every test shares, so
it is `disruptive`: Postgres while the commit transaction is open, and the broker (stop, start) while the job reads.
Afterwards every pipeline is drained without faults and compared with the topics read back from Kafka.

Rounds go on until every kind has struck, MICROINGEST_CHAOS_KILLS kill -9s have landed (default 4: each kill kind
once, the version `make test` runs; `make chaos` asks for 20) and each restart struck MICROINGEST_CHAOS_RESTARTS times
(default 1; `make chaos` 5). The Postgres crashes (immediate shutdown, then crash recovery) at the two moments of a
batch that hold or open its commit are the tests after them.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from helpers.exactly_once import Producer, declare_sink_pipelines, verify, verify_topics
from helpers.pipeline_env import SERVED_FOLDER, new_env, read_to_end
from local_platform.faults import cluster
from local_platform.faults.cluster import platform
from microingest import settings
from microingest.declare.pipeline import Pipeline
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_next_batch
from microingest.spark.submit import SUBMIT_CONN_ID
from microingest.systems.kafka_access import create_topic

KILLS_WANTED = int(os.environ.get("MICROINGEST_CHAOS_KILLS", "4"))
SEED = int(os.environ.get("MICROINGEST_CHAOS_SEED", str(int(time.time()))))
RESTARTS_WANTED = int(os.environ.get("MICROINGEST_CHAOS_RESTARTS", "1"))
# kill -9 of the job's own processes: every other test may run beside these
KILL_KINDS = ("after_open", "after_decode", "before_commit", "kill_random")
# restarts of services every test shares: `disruptive`
RESTART_KINDS = ("postgres_restart_in_commit", "broker_restart_in_read")


def ingest_once(env) -> float | None:
    """One batch ingested without a fault; the seconds its job took, None when nothing was planned."""
    plan = plan_next_batch(env.pipeline)
    if not plan.ranges:
        return None
    started = time.monotonic()
    result = env.spark_job(list(plan.ranges))
    assert result.returncode == 0, result.stdout[-3000:]
    return time.monotonic() - started


KILLED, KILLED_RANDOMLY, NO_FAULT = "killed at a fault point", "kill -9 at a random moment", "no fault landed"


def run_round(env, fault: str, rnd: random.Random, tmp: Path, job_s: float) -> tuple[str, str]:
    """Plan one batch and break it; returns (category, detail) of what happened, for the report. `job_s`: how long a
    whole job took last, the span a random kill is drawn from."""
    plan = plan_next_batch(env.pipeline)
    if not plan.ranges:
        return NO_FAULT, "nothing planned"
    ranges = list(plan.ranges)
    if fault in ("after_open", "after_decode", "before_commit"):
        result = env.spark_job(ranges, fault=fault)
        assert result.returncode != 0, f"fault {fault} did not fire"
        return KILLED, f"kill -9 at {fault}"
    if fault == "postgres_restart_in_commit":
        marker = tmp / f"pause-{uuid.uuid4().hex}"
        proc = env.paused_job(ranges, "before_commit", marker)
        platform("restart", "postgres")
        marker.unlink(missing_ok=True)
        _out, _ = proc.communicate(timeout=300)
        assert proc.returncode != 0, "a commit whose connection died must not report success"
        return "postgres restarted during commit", "the open commit transaction lost its connection"
    if fault == "broker_restart_in_read":
        # Held before its read until the broker is down, so the read meets the restart; it may fail or wait it out.
        marker = tmp / f"pause-{uuid.uuid4().hex}"
        proc = env.paused_job(ranges, "after_open", marker)
        platform("stop", "kafka")
        marker.unlink()
        time.sleep(rnd.uniform(1, 4))
        platform("start", "kafka")
        proc.communicate(timeout=600)
        return "broker restarted during read", f"job exit {proc.returncode}"
    proc = env.spark_job(ranges, wait=False)
    delay = rnd.uniform(1, max(2.0, job_s))
    try:
        proc.communicate(timeout=delay)
        return NO_FAULT, f"job finished (exit {proc.returncode}) before its kill at {delay:.1f}s"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return KILLED_RANDOMLY, f"after {delay:.1f}s"


def airflow_running() -> bool:
    try:
        os.kill(int((settings.state_dir() / "run" / "airflow-scheduler.pid").read_text()), 0)
        return True
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False


def bring_airflow_back() -> None:
    """`make test` runs Airflow beside these tests, on the same Postgres. Its services reconnect, or exit and are
    restarted by the platform's supervisor; one that hangs instead would fail every later test that goes through
    Airflow, so after a wait it is restarted as an operator would. Healthy means each has heartbeat since Postgres
    came back: one that has not yet may still exit on the errors it met, and be restarted under the next test."""
    since = time.time()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if cluster.airflow_healthy(since):
            return
        time.sleep(2)
    print("Airflow did not recover from the Postgres restart in 180 s: restarting it", flush=True)
    platform("stop", "airflow", timeout=300)
    platform("up", "--pipelines-dir", SERVED_FOLDER, "--spark-connect", "--schema-registry")


@pytest.fixture
def postgres_crashes():
    """The test crashes Postgres: Airflow, when it runs beside, is healthy again before the next test starts."""
    was_running = airflow_running()
    yield
    if was_running:
        bring_airflow_back()


def test_exactly_once_under_kills(pg, kafka, tmp_path, monkeypatch):
    """kill -9 of Spark jobs, at each fault point and at random moments, until MICROINGEST_CHAOS_KILLS have landed."""

    def enough(outcomes: Counter, struck: Counter) -> bool:
        return kills(outcomes) >= KILLS_WANTED

    judge("kills", chaos(pg, kafka, tmp_path, monkeypatch, KILL_KINDS, enough))


@pytest.mark.disruptive
def test_exactly_once_under_service_restarts(pg, kafka, tmp_path, monkeypatch):
    """Postgres restarted while a commit transaction is open, the broker stopped and started during a read: each
    MICROINGEST_CHAOS_RESTARTS times."""

    def enough(outcomes: Counter, struck: Counter) -> bool:
        return all(struck[kind] >= RESTARTS_WANTED for kind in RESTART_KINDS)

    judge("restarts", chaos(pg, kafka, tmp_path, monkeypatch, RESTART_KINDS, enough))


def judge(name: str, report: dict) -> None:
    """Both tests' reports are kept in one file, each under its name; nothing lost or duplicated, every kind struck."""
    path = settings.state_dir() / "chaos-report.json"
    kept = json.loads(path.read_text()) if path.exists() else {}
    reports = {key: kept[key] for key in ("kills", "restarts") if key in kept}  # an older, flat report is dropped
    path.write_text(json.dumps({**reports, name: report}, indent=2))
    assert report["lost"] == 0 and report["duplicated"] == 0, report
    assert all(report["struck"].values()), f"a fault kind never struck: {report['struck']}"


def kills(outcomes: Counter) -> int:
    return outcomes[KILLED] + outcomes[KILLED_RANDOMLY]


def chaos(pg, kafka, tmp_path, monkeypatch, kinds: tuple[str, ...], enough) -> dict:
    """Rounds of `kinds` in turn, each on the next pipeline, until every kind struck and `enough(outcomes, struck)`;
    then every pipeline drained without faults and compared with its topics read back. Returns the report."""
    rnd = random.Random(SEED)
    suffix = uuid.uuid4().hex[:8]
    topic = f"chaos-{suffix}"
    folder = tmp_path / "pipelines"
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(folder))
    # Each job a Spark application whose driver the faults kill; the long-lived driver's kills are test_spark_connect's.
    common = {
        "max_records_per_batch": 1500,
        "dead_letter": {"max_fraction": 0.5},
        "retries": 0,
        "spark_conn_id": SUBMIT_CONN_ID,
    }
    sinks = declare_sink_pipelines(pg, kafka, folder, f"chaos_{suffix}", topic, common)
    second = f"{topic}-b"
    create_topic(kafka, second, 2)
    both = new_env(pg, kafka, folder, f"chaos_{suffix}_topics", topic, topics=[topic, second], **common)
    envs = [sinks.append, sinks.upsert, sinks.aggregate, sinks.unkeyed, both]

    airflow_was_running = airflow_running()
    producer, producer_b = Producer(kafka, topic, SEED), Producer(kafka, second, SEED + 1)
    producer.start()
    producer_b.start()
    outcomes, struck = Counter(), Counter()
    try:
        time.sleep(3)
        rounds = 0
        job_s = 8.0  # until a job without a fault has been timed
        while not enough(outcomes, struck) or len(struck) < len(kinds):
            # Only a random kill can miss (its job may end before the kill): the bound stops a run where it keeps
            # missing.
            assert rounds < 2 * len(kinds) + 2 * (KILLS_WANTED + RESTARTS_WANTED), f"faults keep missing: {outcomes}"
            env, kind = envs[rounds % len(envs)], kinds[rounds % len(kinds)]
            category, detail = run_round(env, kind, rnd, tmp_path, job_s)
            outcomes[category] += 1
            if category != NO_FAULT:
                struck[kind] += 1
            rounds += 1
            print(f"round {rounds} {env.pipeline.name} {kind}: {category} ({detail})", flush=True)
            if rounds % 3 == 0:  # let a batch through between faults, so the ledgers move on
                job_s = ingest_once(env) or job_s
    finally:
        for p in (producer, producer_b):
            p.stopping.set()
        for p in (producer, producer_b):
            p.join(timeout=120)
        if airflow_was_running and outcomes["postgres restarted during commit"]:
            bring_airflow_back()

    for env in envs:  # drain what is left without faults, in one batch per pipeline, on the Spark Connect server
        env.redeclare(max_records_per_batch=1_000_000, spark_conn_id=Pipeline.spark_conn_id)
        env.ingest_all()
    truth = read_to_end(kafka, topic, isolation_level="read_committed")
    report = verify(sinks, truth)
    several = verify_topics(both, {topic: truth, second: read_to_end(kafka, second, isolation_level="read_committed")})
    report.update(
        {
            "several_topics": several,
            "lost": report["lost"] + several["lost"],
            "duplicated": report["duplicated"] + several["duplicated"],
        }
    )
    report.update(
        {
            "seed": SEED,
            "rounds": rounds,
            "outcomes": dict(outcomes),
            "producer_send_errors": producer.errors + producer_b.errors,
            "faults_landed": rounds - outcomes[NO_FAULT],
            "kills": kills(outcomes),
            "struck": {kind: struck[kind] for kind in kinds},
        }
    )
    print("chaos report: " + json.dumps(report), flush=True)
    return report


@pytest.mark.disruptive
def test_a_postgres_crash_between_decoding_and_commit_leaves_the_commit_its_own_connection(
    submit_env, tmp_path, postgres_crashes
):
    """Reading a batch holds no Postgres connection while Spark decodes it: the commit opens its own afterwards, so
    a Postgres that crashed and recovered meanwhile (`platform crash` returns once it is up again) takes the batch,
    every record once."""
    env = submit_env
    produced = env.produce(300)
    marker = tmp_path / "decoded"
    proc = env.paused_job(list(plan_next_batch(env.pipeline).ranges), "after_decode", marker)
    platform("crash", "postgres")
    marker.unlink()
    out, _ = proc.communicate(timeout=300)

    assert proc.returncode == 0, out[-3000:]
    assert env.target_rows() == sorted(produced)


@pytest.mark.disruptive
def test_a_postgres_crash_inside_the_commit_is_retried_and_lands_once(submit_env, tmp_path, postgres_crashes):
    """The batch whose transaction the crash ended, everything written and not committed, is not refused as if the
    read were wrong: the job fails as a transient failure (no refusal exit code), nothing of it stays, and the retry
    lands every record."""
    env = submit_env
    produced = env.produce(300)
    marker = tmp_path / "committing"
    proc = env.paused_job(list(plan_next_batch(env.pipeline).ranges), "before_commit", marker)
    platform("crash", "postgres")
    marker.unlink()
    out, _ = proc.communicate(timeout=300)

    assert proc.returncode not in (0, REFUSED_EXIT), out[-3000:]  # failed, and not refused: retried
    assert env.target_rows() == [] and env.ledger() == {}
    env.ingest_all()
    assert env.target_rows() == sorted(produced)
