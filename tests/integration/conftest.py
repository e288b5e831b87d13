"""Fixtures for tests against the real platform started by `make test` (Kafka, Postgres, Spark, Airflow's DB).

Every test gets its own topic, target table and pipeline declaration, so tests never see each other's data.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import browser_session
import pytest
from psycopg2 import sql

from microingest.commit.history import RunInfo
from microingest.declare.declarations import Pipeline, load_pipeline_file
from microingest.declare.identifiers import split_table_name
from microingest.plan.offsets import OffsetRange, RunPlan
from microingest.spark import connect as spark_connect
from microingest.spark import submit as spark_submit
from microingest.systems.connections import get_connection, kafka_python_config, postgres_params
from microingest.systems.kafka_access import create_topic, json_bytes, produce
from microingest.systems.postgres import connection

REPO = Path(__file__).resolve().parents[2]
REQUIRED_ENV = ("AIRFLOW_CONN_MICROINGEST_POSTGRES", "AIRFLOW_CONN_MICROINGEST_KAFKA", "AIRFLOW_HOME")
# kafka-python logs every connection at INFO: a failing test's report would be that chatter, not the failure.
logging.getLogger("kafka").setLevel(logging.WARNING)


def pytest_collection_modifyitems(items):
    for item in items:
        if "integration" in item.nodeid:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def platform_env():
    missing = [k for k in REQUIRED_ENV if not os.environ.get(k)]
    if missing:
        pytest.fail(f"integration tests need the platform: run them through `make test` (missing {missing})")


@pytest.fixture(scope="session")
def pg():
    return postgres_params(get_connection("microingest_postgres"))


@pytest.fixture(scope="session")
def kafka():
    return kafka_python_config(get_connection("microingest_kafka"))


@dataclass
class Env:
    """One test's pipeline: its declaration, topic and target table, plus helpers to drive and inspect it."""

    pipeline: Pipeline
    pg: dict
    kafka: dict
    pipelines_dir: Path

    def redeclare(self, **changes) -> None:
        """Rewrite this test's declaration with some fields changed (name, topic and table stay)."""
        path = self.pipelines_dir / f"{self.pipeline.name}.yaml"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
        self.pipeline = load_pipeline_file(path)

    @property
    def table(self) -> sql.Identifier:
        return sql.Identifier(*split_table_name(self.pipeline.target_table))

    def send(self, records: list[tuple]) -> list[tuple[int, int]]:
        """Raw (key, value[, headers]) records; returns their (partition, offset)."""
        return produce(self.kafka, self.pipeline.topic, records)

    def send_to(self, partition: int, records: list[tuple], timestamp_ms: int | None = None) -> list[tuple[int, int]]:
        """Raw records into one partition, all with one Kafka timestamp (default: the producer's clock; the broker
        deletes records timestamped beyond its retention, 7 days); returns their (partition, offset)."""
        return produce(self.kafka, self.pipeline.topic, records, partition_of=lambda i, k: partition,
                       timestamp_of=None if timestamp_ms is None else lambda i: timestamp_ms)

    def replace_target(self, columns: str) -> None:
        """Give this test's pipeline a target table of another shape (for the upsert and aggregate sinks)."""
        with connection(self.pg) as conn, conn, conn.cursor() as cur:
            cur.execute(sql.SQL("DROP TABLE {}").format(self.table))
            cur.execute(sql.SQL("CREATE TABLE {} ({})").format(self.table, sql.SQL(columns)))

    def ingest_all(self) -> list:
        """Live runs until nothing is left (one usually: a run commits its whole plan, batch by batch, in one Spark
        job); returns each job's completed process."""
        from microingest.plan.live import plan_live_run

        results = []
        while (plan := plan_live_run(self.pipeline)).ranges:
            results.append(self.spark_job(plan))
            assert results[-1].returncode == 0, results[-1].stdout[-3000:]
        return results

    def batch_count(self) -> int:
        return self.query("SELECT count(*) FROM microingest.batches WHERE pipeline = %s AND kind <> 'pin'",
                          (self.pipeline.name,))[0][0]

    def dead_letters(self) -> list[tuple]:
        return self.query('SELECT partition, "offset", error_class, error_message, record_key, record_value, '
                          'headers FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 1, 2',
                          (self.pipeline.name,))

    def produce(self, n: int, start: int = 0, timestamp_of=None) -> list[tuple[int, int, str]]:
        """n events with ids ev-<start>..; returns (partition, offset, event_id) of each as Kafka acknowledged it.
        `timestamp_of(i)` gives the i-th record's Kafka timestamp (epoch ms) instead of the producer's clock."""
        ids = [f"ev-{i}" for i in range(start, start + n)]
        records = [(i.encode(), json_bytes({"event_id": i, "user_id": f"u{k % 17}", "event_type": "click",
                                            "amount": k * 0.25, "event_time": 1_700_000_000_000 + k}))
                   for k, i in enumerate(ids, start)]
        positions = produce(self.kafka, self.pipeline.topic, records, timestamp_of=timestamp_of)
        return [(p, o, i) for (p, o), i in zip(positions, ids)]

    def query(self, statement, args=()):
        with connection(self.pg) as conn, conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall()

    def query_commit(self, statement, args=()) -> None:
        with connection(self.pg) as conn, conn, conn.cursor() as cur:
            cur.execute(statement, args)

    def target_rows(self) -> list[tuple[int, int, str]]:
        return sorted(self.query(sql.SQL("SELECT source_partition, source_offset, event_id FROM {}").format(self.table)))

    def ledger(self) -> dict[int, int]:
        return dict(self.query("SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s",
                               (self.pipeline.name,)))

    def batches(self) -> list[tuple]:
        return self.query("SELECT batch_id::text, kind, records_read, rows_written, dag_id, run_id FROM "
                          "microingest.batches WHERE pipeline = %s ORDER BY committed_at", (self.pipeline.name,))

    def staged_rows(self) -> int:
        return self.query(sql.SQL("SELECT count(*) FROM {}").format(
            sql.Identifier("microingest_staging", self.pipeline.name)))[0][0]

    def staging_batches(self) -> int:
        return self.query("SELECT count(*) FROM microingest.staging_batches WHERE pipeline = %s",
                          (self.pipeline.name,))[0][0]

    def spark_job(self, ranges: list[OffsetRange] | RunPlan, fault: str | None = None, wait: bool = True,
                  extra_conf: dict | None = None, master: str = "local[2]", run: RunInfo = RunInfo(),
                  env_extra: dict | None = None):
        """Run the Spark job outside Airflow, the way the operator does (connections in the environment): by
        spark-submit, or as a client of the Spark Connect server when the pipeline's Spark connection is one.

        Ranges make a live run's plan at the pipeline's batch cap. Either way the job's own output, its stdout and
        stderr, is in the result's stdout (spark-submit forwards the Python driver's both there)."""
        plan = ranges if isinstance(ranges, RunPlan) else RunPlan("ingest", tuple(ranges),
                                                                  self.pipeline.max_records_per_batch)
        env = {**os.environ, **spark_submit.connection_env(self.pipeline),
               "MICROINGEST_PIPELINES_DIR": str(self.pipelines_dir)}
        env.update(env_extra or {})
        if fault:
            env["MICROINGEST_FAULT"] = fault
        if spark_connect.is_spark_connect(get_connection(self.pipeline.spark_conn_id)):
            assert master == "local[2]" and not extra_conf, "Spark conf is the Spark Connect server's"
            cmd = spark_connect.job_command(self.pipeline, plan, run)
            stderr = subprocess.STDOUT  # the job's log and errors in stdout, as spark-submit forwards them
        else:
            cmd = spark_submit.command(self.pipeline, plan, run, master=master,
                                       extra_conf={"spark.ui.enabled": "false", **(extra_conf or {})})
            stderr = subprocess.PIPE
        # A session of its own, so a test can kill -9 the whole job: spark-submit's JVM and its Python processes.
        proc = subprocess.Popen(cmd, env=env, cwd=self.pipelines_dir, stdout=subprocess.PIPE, stderr=stderr,
                                text=True, start_new_session=True)
        return _finish(proc) if wait else proc

    def paused_job(self, ranges: list[OffsetRange], point: str, marker: Path, **job) -> subprocess.Popen:
        """The Spark job of these ranges, started and paused at fault point `point` (until `marker` is removed)."""
        proc = self.spark_job(ranges, fault=f"{point}:pause:{marker}", wait=False, **job)
        deadline = time.time() + 180
        while not marker.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert marker.exists(), f"the job did not reach {point}: exit {proc.poll()}"
        return proc


def _finish(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err or "")


@pytest.fixture
def finish():
    return _finish


DEMO_SCHEMA = {"event_id": {"type": "string", "required": True}, "user_id": "string", "event_type": "string",
               "amount": "double", "event_time": "timestamp"}


def new_env(pg, kafka, folder: Path, name: str, topic: str, **declaration) -> Env:
    """Declare pipeline `name` on `topic` (created if missing) with a fresh target table shaped like demo_events."""
    table = f"public.{name}"
    create_topic(kafka, topic, 3)
    with connection(pg) as conn, conn, conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE TABLE {} (LIKE public.demo_events INCLUDING ALL)").format(
            sql.Identifier(*split_table_name(table))))
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps({"name": name, "topic": topic, "target_table": table, "max_records_per_batch": 100_000,
                                "schema": DEMO_SCHEMA, **declaration}))
    return Env(load_pipeline_file(path), pg, kafka, folder)


def _test_env(pg, kafka, tmp_path, monkeypatch, **declaration) -> Env:
    suffix = uuid.uuid4().hex[:10]
    folder = tmp_path / "pipelines"
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(folder))
    return new_env(pg, kafka, folder, f"it_{suffix}", f"it-{suffix}", **declaration)


@pytest.fixture
def env(pg, kafka, tmp_path, monkeypatch) -> Env:
    """A pipeline of the test's own whose Spark jobs run on the Spark Connect server `make test` starts: the same
    run_plan, Kafka source and staging as under spark-submit, without a JVM start (about 20 s) for every job. Modules
    whose subject is spark-submit itself (its command, the operator, executor fault points, a cluster) take
    `submit_env` instead."""
    return _test_env(pg, kafka, tmp_path, monkeypatch, spark_conn_id=spark_connect.PLATFORM_CONN_ID)


@pytest.fixture
def submit_env(pg, kafka, tmp_path, monkeypatch) -> Env:
    """A pipeline of the test's own on the default Spark connection: each job is a spark-submit of its own."""
    return _test_env(pg, kafka, tmp_path, monkeypatch)


SERVED_FOLDER = os.environ.get("MICROINGEST_PIPELINES_DIR", "")  # before any test changes it

# Pipelines served by the running Airflow (`make test` starts it on this folder), one per role of the tests that go
# through Airflow's API or UI. Declared together so that one parsing cycle of the dag-processor registers them all.
# Their jobs run on the Spark Connect server, except those of "live": a scheduler's run through spark-submit.
ON_SPARK_SUBMIT = ("live",)
SERVED_DECLARATIONS = {
    "live": {},
    "bad_params": {"max_active_runs": 3},
    "history": {"start_from": "latest"},
    # Airflow's own backfill needs a periodic schedule; two of its runs at once need two active runs.
    "native": {"start_from": "latest", "schedule": "@hourly", "max_active_runs": 2},
    "ui": {"start_from": "latest"},
    # Scheduled every minute, its runs wait in the triggerer for 50 records.
    "gated": {"schedule": "* * * * *", "lag": {"gate": {"min_records": 50, "max_wait_seconds": 3600,
                                                         "wait_seconds": 600, "poke_seconds": 3}}},
    "sla": {"lag": {"sla": {"max_time_lag_seconds": 86400, "grace_seconds": 15}}},
    "connect": {},
    "poison": {},
    "skip": {"dead_letter": {"max_records": 0}},
}


@pytest.fixture
def browser():
    yield from browser_session.chrome()


@pytest.fixture(scope="session")
def api():
    from microingest.cli.rest_client import AirflowClient

    return AirflowClient()


@pytest.fixture(scope="session")
def served(pg, kafka, api) -> dict[str, Env]:
    folder = Path(SERVED_FOLDER)
    if not SERVED_FOLDER or folder.resolve() == (REPO / "pipelines").resolve():
        pytest.fail("the running Airflow serves the repository's pipelines/; `make test` restarts it on a folder "
                    "of the suite's own (the tests would otherwise declare pipelines in pipelines/)")
    envs = {}
    for role, declaration in SERVED_DECLARATIONS.items():
        suffix = uuid.uuid4().hex[:8]
        if role not in ON_SPARK_SUBMIT:
            declaration = {"spark_conn_id": spark_connect.PLATFORM_CONN_ID, **declaration}
        envs[role] = new_env(pg, kafka, folder, f"api_{role}_{suffix}", f"api-{role}-{suffix}", **declaration)
    for env in envs.values():
        api.wait_for_dag(env.pipeline.dag_id, timeout=240, say=lambda m: None)
        if not env.pipeline.schedule:  # a scheduled one is unpaused by its test, when its scheduled runs may start
            api.unpause(env.pipeline.dag_id)
    return envs
