"""A test's own pipeline against the real platform `make test` starts, and what tests use to drive and inspect it.

Apart from conftest.py, which is pytest's to load: its fixtures build on this module, and test modules that declare
pipelines of their own (several on one topic, say) or check what landed import from here.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition
from psycopg2 import sql

from microingest import settings
from microingest.airflow.job_process import JobProcess
from microingest.batches import OffsetRange, RunInfo, RunPlan
from microingest.declare.files import load_pipeline_file
from microingest.declare.identifiers import table_identifier
from microingest.declare.pipeline import Pipeline
from microingest.spark import connect as spark_connect
from microingest.spark import submit as spark_submit
from microingest.systems.connections import get_connection
from microingest.systems.kafka_access import create_topic, json_bytes, produce
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import connection

# The serializers' settings in the tests: the subject named after the topic, as producers have it by default (newer
# confluent-kafka asks the registry for "associations" first, an API Apicurio lacks, and has hung on the answer), and
# a registry that stops answering fails the test instead of stalling it.
SERIALIZER_CONF = {"subject.name.strategy.type": "TOPIC"}
REGISTRY_TIMEOUT = {"timeout": 30}


DEMO_SCHEMA = {
    "event_id": {"type": "string", "required": True},
    "user_id": "string",
    "event_type": "string",
    "amount": "double",
    "event_time": "timestamp",
}

# The demo_events columns keyed by record_key instead of the source position, as the upsert_latest sink wants them.
UPSERT_TARGET = (
    "record_key text PRIMARY KEY, source_topic text NOT NULL, source_partition integer NOT NULL, "
    "source_offset bigint NOT NULL, kafka_timestamp timestamptz, batch_id uuid NOT NULL, "
    "event_id text NOT NULL, user_id text, event_type text, amount double precision, "
    "event_time timestamptz"
)

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
    "gated": {
        "schedule": "* * * * *",
        "lag": {"gate": {"min_records": 50, "max_wait_seconds": 3600, "wait_seconds": 600, "poke_seconds": 3}},
    },
    "sla": {"lag": {"sla": {"max_time_lag_seconds": 86400, "grace_seconds": 15}}},
    "connect": {},
    "poison": {},
    "skip": {"dead_letter": {"max_records": 0}},
    "redrive": {},
    "ui_redrive": {},
    # Woken by records: an AssetWatcher's trigger starts a run once a record waits (looking every 2 s).
    "woken": {"schedule": "on_records", "on_records": {"min_records": 1, "max_wait_seconds": 30, "poke_seconds": 2}},
    # A bad record in its second batch of 100 fails the run after the first batch committed.
    "announced": {"dead_letter": {"max_records": 0}, "max_records_per_batch": 100},
    "metrics": {"max_records_per_batch": 100},
    "replay": {"max_records_per_batch": 40},
    "avro": {"value_format": "avro"},
    "protobuf": {"value_format": "protobuf"},
    # Every topic named after its own: {topic} is the one the env is made on.
    "topics": {"topic_pattern": "{topic}(-.+)?"},
}
# Served pipelines whose target the run's planning creates from the declaration, as it would for a new user's.
NO_TABLE_MADE = ("avro", "protobuf")


class RawHeaderName(str):
    """A header name of any bytes: kafka-python's producer writes `name.encode("utf-8")`, which this gives as they
    are (Kafka's record format allows any bytes there; Java's producer API would not write these)."""

    def __new__(cls, raw: bytes):
        name = str.__new__(cls, raw.decode("latin-1"))
        name.raw = raw
        return name

    def encode(self, *args, **kwargs) -> bytes:
        return self.raw


@dataclass
class Env:
    """One test's pipeline: its declaration, topic and target table, plus helpers to drive and inspect it."""

    pipeline: Pipeline
    pg: dict
    kafka: dict
    pipelines_dir: Path
    made_on: str | None = None  # the topic new_env made it on (a pattern names none)

    def redeclare(self, **changes) -> None:
        """Rewrite this test's declaration with some fields changed (name, topic and table stay)."""
        path = self.pipelines_dir / f"{self.pipeline.name}.yaml"
        path.write_text(json.dumps({**json.loads(path.read_text()), **changes}))
        self.pipeline = load_pipeline_file(path)

    @property
    def table(self) -> sql.Identifier:
        return table_identifier(self.pipeline.target_table)

    @property
    def topic(self) -> str:
        """The topic the env was made on (else the first of those the pipeline names)."""
        return self.made_on or self.pipeline.topics[0]

    def send(self, records: list[tuple]) -> list[tuple[int, int]]:
        """Raw (key, value[, headers]) records; returns their (partition, offset)."""
        return produce(self.kafka, self.topic, records)

    def send_to(self, partition: int, records: list[tuple], timestamp_ms: int | None = None) -> list[tuple[int, int]]:
        """Raw records into one partition, all with one Kafka timestamp (default: the producer's clock; the broker
        deletes records timestamped beyond its retention, 7 days); returns their (partition, offset)."""
        return produce(
            self.kafka,
            self.topic,
            records,
            partition_of=lambda i, k: partition,
            timestamp_of=None if timestamp_ms is None else lambda i: timestamp_ms,
        )

    def replace_target(self, columns: str) -> None:
        """Give this test's pipeline a target table of another shape (for the upsert and aggregate sinks)."""
        with connection(self.pg) as conn, conn, conn.cursor() as cur:
            cur.execute(sql.SQL("DROP TABLE {}").format(self.table))
            cur.execute(sql.SQL("CREATE TABLE {} ({})").format(self.table, sql.SQL(columns)))

    def ingest_all(self, **job) -> list:
        """Live runs until nothing is left (one usually: a run commits its whole plan, batch by batch, in one Spark
        job); returns each job's completed process. `job`: spark_job's settings (env_extra, say)."""
        from microingest.plan.live import plan_live_run

        results = []
        while (plan := plan_live_run(self.pipeline)).ranges:
            results.append(self.spark_job(plan, **job))
            assert results[-1].returncode == 0, results[-1].stdout[-3000:]
        return results

    def batch_count(self) -> int:
        return self.query(
            "SELECT count(*) FROM microingest.batches WHERE pipeline = %s AND kind <> 'pin'", (self.pipeline.name,)
        )[0][0]

    def dead_letters(self) -> list[tuple]:
        return self.query(
            'SELECT partition, "offset", error_class, error_message, record_key, record_value, '
            "headers FROM microingest.dead_letters WHERE pipeline = %s ORDER BY 1, 2",
            (self.pipeline.name,),
        )

    def produce(self, n: int, start: int = 0, timestamp_of=None) -> list[tuple[int, int, str]]:
        """n events with ids ev-<start>..; returns (partition, offset, event_id) of each as Kafka acknowledged it.
        `timestamp_of(i)` gives the i-th record's Kafka timestamp (epoch ms) instead of the producer's clock."""
        ids = [f"ev-{i}" for i in range(start, start + n)]
        records = [
            (
                i.encode(),
                json_bytes(
                    {
                        "event_id": i,
                        "user_id": f"u{k % 17}",
                        "event_type": "click",
                        "amount": k * 0.25,
                        "event_time": 1_700_000_000_000 + k,
                    }
                ),
            )
            for k, i in enumerate(ids, start)
        ]
        positions = produce(self.kafka, self.topic, records, timestamp_of=timestamp_of)
        return [(p, o, i) for (p, o), i in zip(positions, ids)]

    def query(self, statement, args=()):
        with connection(self.pg) as conn, conn.cursor() as cur:
            cur.execute(statement, args)
            return cur.fetchall()

    def query_commit(self, statement, args=()) -> None:
        with connection(self.pg) as conn, conn, conn.cursor() as cur:
            cur.execute(statement, args)

    def target_rows(self) -> list[tuple[int, int, str]]:
        statement = sql.SQL("SELECT source_partition, source_offset, event_id FROM {}").format(self.table)
        return sorted(self.query(statement))

    def landed_once(self) -> list[tuple[int, int, str]]:
        """The target's rows, failing on a Kafka position that landed twice: the append target of most tests has a
        key on it, but the tests whose subject is exactly once must not rely on that key to say so."""
        rows = self.target_rows()
        assert not [pos for pos, n in Counter((p, o) for p, o, _ in rows).items() if n > 1], "duplicated positions"
        return rows

    def assert_exactly_once(self, produced: list[tuple[int, int, str]]) -> None:
        """Every produced record in the target, once: what a run, however it was broken, must end with."""
        assert self.landed_once() == sorted(produced), "every produced record, none lost"

    def ledger(self) -> dict[int, int]:
        return dict(
            self.query(
                "SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s", (self.pipeline.name,)
            )
        )

    def batches(self) -> list[tuple]:
        return self.query(
            "SELECT batch_id::text, kind, records_read, rows_written, dag_id, run_id FROM "
            "microingest.batches WHERE pipeline = %s ORDER BY committed_at",
            (self.pipeline.name,),
        )

    def spark_job(
        self,
        ranges: list[OffsetRange] | RunPlan,
        fault: str | None = None,
        wait: bool = True,
        extra_conf: dict | None = None,
        master: str = "local[2]",
        run: RunInfo = RunInfo(),
        env_extra: dict | None = None,
    ):
        """Run the Spark job outside Airflow, the way the operator does (connections in the environment): by
        spark-submit, or as a client of the Spark Connect server when the pipeline's Spark connection is one.

        Ranges make a live run's plan at the pipeline's batch cap. Either way the job's own output, its stdout and
        stderr, is in the result's stdout (spark-submit forwards the Python driver's both there)."""
        plan = (
            ranges
            if isinstance(ranges, RunPlan)
            else RunPlan("ingest", tuple(ranges), self.pipeline.max_records_per_batch)
        )
        env = {
            **os.environ,
            **PipelineSystems.of(self.pipeline).as_env(),
            "MICROINGEST_PIPELINES_DIR": str(self.pipelines_dir),
        }
        env.update(env_extra or {})
        if fault:
            env["MICROINGEST_FAULT"] = fault
        if spark_connect.is_spark_connect(get_connection(self.pipeline.spark_conn_id)):
            assert master == "local[2]" and not extra_conf, "Spark conf is the Spark Connect server's"
            cmd = spark_connect.job_command(self.pipeline, plan, run)
            if wait:  # as the operator runs it: forked by the job-forks server, whose imports are done
                return forked_job(cmd, env)
            stderr = subprocess.STDOUT  # the job's log and errors in stdout, as spark-submit forwards them
        else:
            cmd = spark_submit.command(
                self.pipeline, plan, run, master=master, extra_conf={"spark.ui.enabled": "false", **(extra_conf or {})}
            )
            stderr = subprocess.PIPE
        # A session of its own, so a test can kill -9 the whole job: spark-submit's JVM and its Python processes.
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=self.pipelines_dir,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        return job_result(proc) if wait else proc

    def paused_job(self, ranges: list[OffsetRange], point: str, marker: Path, **job) -> subprocess.Popen:
        """The Spark job of these ranges, started and paused at fault point `point` (until `marker` is removed)."""
        proc = self.spark_job(ranges, fault=f"{point}:pause:{marker}", wait=False, **job)
        assert reached_pause(proc, marker), f"the job did not reach {point}: exit {proc.poll()}"
        return proc


class _Output:
    """A logger for JobProcess that keeps the job's lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args) -> None:
        self.lines.append(message % args if args else message)


def forked_job(cmd: list[str], env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    """A Spark Connect job run the operator's way (`JobProcess`): forked by the platform's job-forks server when it
    runs this code, else a new interpreter; its output as stdout. Stopped after `timeout`, as job_result would."""
    output = _Output()
    job = JobProcess(cmd, env, output, forkable=True)
    watchdog = threading.Timer(timeout, job.stop, kwargs={"grace_seconds": 5})
    watchdog.start()
    try:
        code = job.run()
    finally:
        watchdog.cancel()
    return subprocess.CompletedProcess(cmd, code, "\n".join(output.lines) + "\n", "")


def job_result(proc: subprocess.Popen, timeout: float = 300) -> subprocess.CompletedProcess:
    """A job started with wait=False, waited for and shaped like one run to its end (stderr "" when merged)."""
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err or "")


def reached_pause(proc: subprocess.Popen, marker: Path, timeout: float = 180) -> bool:
    """Whether a job paused at its fault point (the pause writes `marker`) within `timeout`: a job that exits first
    never will, so waiting stops there too."""
    deadline = time.time() + timeout
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    return marker.exists()


def read_to_end(
    kafka: dict, topic: str, partitions: list[int] | None = None, isolation_level: str = "read_uncommitted"
) -> list[tuple[int, int, bytes, bytes | None, int]]:
    """(partition, offset, key, value, timestamp ms) of every record the topic (or these partitions of it) serves,
    read up to each partition's end offset: reading until nothing came for a while would take a slow fetch for
    records that are not there. read_committed leaves out aborted transactions, and ends at the last stable offset."""
    consumer = KafkaConsumer(**kafka, isolation_level=isolation_level, enable_auto_commit=False)
    numbers = consumer.partitions_for_topic(topic) if partitions is None else partitions
    assigned = [TopicPartition(topic, p) for p in numbers]
    consumer.assign(assigned)
    consumer.seek_to_beginning(*assigned)
    end = consumer.end_offsets(assigned)
    records = []
    while any(consumer.position(tp) < end[tp] for tp in assigned):
        for batch in consumer.poll(timeout_ms=2000).values():
            records += [(r.partition, r.offset, r.key, r.value, r.timestamp) for r in batch]
    consumer.close()
    return records


def new_env(pg, kafka, folder: Path, name: str, topic: str, create_table: bool = True, **declaration) -> Env:
    """Declare pipeline `name` on `topic` (created if missing) with a fresh target table shaped like demo_events, or
    none at all: the declaration's own, made by `microingest migrate` or a DAG run's planning."""
    if folder.resolve() == (settings.repo_root() / "pipelines").resolve():
        raise RuntimeError(
            f"the platform serves the repository's pipelines/: a test would declare {name} there "
            "(`make test` and `make test-cluster` serve a folder of the suite's own)"
        )
    table = f"public.{name}"
    create_topic(kafka, topic, 3)
    if create_table:
        with connection(pg) as conn, conn, conn.cursor() as cur:
            cur.execute(
                sql.SQL("CREATE TABLE {} (LIKE public.demo_events INCLUDING ALL)").format(table_identifier(table))
            )
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(
        json.dumps(
            {
                "name": name,
                # a declaration naming its topics otherwise (topics, topic_pattern) reads `topic` among them
                **({} if {"topics", "topic_pattern"} & set(declaration) else {"topic": topic}),
                "target_table": table,
                "max_records_per_batch": 100_000,
                "schema": DEMO_SCHEMA,
                **declaration,
            }
        )
    )
    return Env(load_pipeline_file(path), pg, kafka, folder, topic)


def own_env(pg, kafka, tmp_path: Path, monkeypatch, **declaration) -> Env:
    """A pipeline no other test shares: its name, topic and table carry a random suffix, its declaration is in the
    test's temporary folder (which the job and the planner read, through the environment)."""
    suffix = uuid.uuid4().hex[:10]
    folder = tmp_path / "pipelines"
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(folder))
    return new_env(pg, kafka, folder, f"it_{suffix}", f"it-{suffix}", **declaration)


def declare_served(pg, kafka, folder: Path) -> dict[str, Env]:
    """One pipeline per role of SERVED_DECLARATIONS in the folder Airflow serves, under fresh names: the suite's runs
    must not find an earlier session's DAG runs or ledger."""
    envs = {}
    for role, declaration in SERVED_DECLARATIONS.items():
        suffix = uuid.uuid4().hex[:8]
        if role in ON_SPARK_SUBMIT:
            declaration = {"spark_conn_id": spark_submit.SUBMIT_CONN_ID, **declaration}
        if "topic_pattern" in declaration:
            declaration = {
                **declaration,
                "topic_pattern": declaration["topic_pattern"].format(topic=f"api-{role}-{suffix}"),
            }
        envs[role] = new_env(
            pg,
            kafka,
            folder,
            f"api_{role}_{suffix}",
            f"api-{role}-{suffix}",
            create_table=role not in NO_TABLE_MADE,
            **declaration,
        )
    return envs
