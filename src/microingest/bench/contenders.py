"""How each contender is started and timed. Every run consumes what the topic holds at its start and is timed from
launch (spark-submit, the DAG trigger, the loop's process start) to its last commit in Postgres."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from microingest import settings
from microingest.batches import RunInfo
from microingest.bench.dataset import SCHEMA, dataset_topic
from microingest.bench.kafka_loop import dead_table
from microingest.bench.orders_dataset import TIME_COLUMN as ORDERS_TIME_COLUMN
from microingest.bench.orders_dataset import orders_declaration
from microingest.bench.phases import batch_times, split
from microingest.bench.targets import table_name
from microingest.declare.files import load_pipeline_file
from microingest.declare.pipeline import Pipeline
from microingest.plan.live import plan_live_run
from microingest.spark import connect as spark_connect
from microingest.spark import submit as spark_submit
from microingest.systems.airflow_api import AirflowClient
from microingest.systems.connections import get_connection
from microingest.systems.kafka_access import partition_bounds
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import connection


class BenchError(RuntimeError):
    pass


@dataclass(frozen=True)
class Context:
    pg: dict[str, Any]
    kafka: dict[str, Any]
    topic: str
    run_id: str
    batch_records: int
    work_dir: Path  # checkpoints and logs of this bench run
    say: Callable[[str], None]
    timestamps: str = "iso"  # how the JSON events write event_time (bench.dataset.TIMESTAMPS)


@dataclass(frozen=True)
class Run:
    seconds: float  # launch → last commit
    records: int  # records the contender says it consumed
    phases: dict[str, float] = field(default_factory=dict)  # the platform's: where the seconds went (bench.phases)
    # role -> peak RSS (MiB) the contender's own process measured (its VmHWM): exact however short the process,
    # where the memory sampler (bench.memory) misses a process that ends between two samples
    own_peak_rss_mib: dict[str, float] = field(default_factory=dict)
    decoded_in_jvm: int | None = None  # the platform's: records its JVM decoder read (the batch history's figure)


class Contender:
    key = ""
    label = ""
    family = "alternative"  # or "microingest"
    dataset = (
        "json"  # what it reads: the JSON events, the same as Avro (bench.avro_dataset), or orders (bench.dataset.KINDS)
    )

    def __init__(self, ctx: Context):
        self.ctx = ctx

    @property
    def topic(self) -> str:
        return dataset_topic(self.ctx.topic, self.dataset)

    @property
    def time_column(self) -> str:
        """The value column holding record i's time, EVENT_TIME_MS + i."""
        return ORDERS_TIME_COLUMN if self.dataset == "orders" else "event_time"

    @property
    def long_lived(self) -> bool:
        """Runs on the long-lived Spark Connect driver."""
        return False

    @property
    def markers(self) -> tuple[str, ...]:
        """Strings in the command lines of this contender's processes, for the memory sampler."""
        return (f"bench-{self.ctx.run_id}-{self.key}",)

    def prepare(self) -> None:
        """Work before the timed runs (declaring a pipeline and waiting for its DAG)."""

    def run(self) -> Run:
        raise NotImplementedError

    def dead_letters(self) -> int | None:
        """The malformed records the contender kept aside (None: it drops them, as Spark's from_json does)."""
        return None


def run_logged(argv: list[str], env: dict[str, str], log: Path, timeout: float = 7200) -> str:
    """Run to completion, output to `log`; returns its stdout. Fails with the log's tail."""
    with log.open("w") as out:
        proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=out, text=True, timeout=timeout)
        out.write(proc.stdout)
    if proc.returncode != 0:
        raise BenchError(f"{argv[0]} exited {proc.returncode}; log {log}:\n" + "".join(log.read_text()[-3000:]))
    return proc.stdout


def bench_result(stdout: str) -> dict:
    lines = [line[len("BENCH ") :] for line in stdout.splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise BenchError("the job printed no BENCH result line")
    return json.loads(lines[-1])


class _Platform(Contender):
    family = "microingest"
    spark_conn_id = spark_connect.PLATFORM_CONN_ID  # the declaration's: the default, the long-lived driver
    max_records_per_run = 1_000_000_000

    def declaration(self) -> dict[str, Any]:
        return {
            "name": self.pipeline_name,
            "description": f"make bench {self.ctx.run_id}: {self.label}",
            "topic": self.topic,
            "target_table": table_name(self.key),
            "schema": SCHEMA,
            "value_format": "avro" if self.dataset == "avro" else "json",
            "max_records_per_batch": self.ctx.batch_records,
            "max_records_per_run": self.max_records_per_run,
            "max_run_seconds": 7200,
            "spark_conn_id": self.spark_conn_id,
        }

    def prepare(self) -> None:
        folder = settings.pipelines_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{self.pipeline_name}.yaml"
        self.path.write_text(json.dumps(self.declaration()))
        self.pipeline: Pipeline = load_pipeline_file(self.path)
        if self.long_lived:
            try:
                spark_connect.answers(get_connection(self.spark_conn_id))
            except Exception as exc:
                raise BenchError(
                    f"{self.label}: the Spark Connect server of connection '{self.spark_conn_id}' does "
                    f"not answer ({type(exc).__name__}); `make bench` starts it"
                ) from None

    def withdraw(self) -> None:
        """Its declaration removed: Airflow stops parsing its DAG, which would cost the later contenders CPU."""
        self.path.unlink(missing_ok=True)

    @property
    def pipeline_name(self) -> str:
        return f"bench_{self.ctx.run_id}_{self.key}"

    @property
    def long_lived(self) -> bool:
        return self.spark_conn_id == spark_connect.PLATFORM_CONN_ID

    @property
    def markers(self) -> tuple[str, ...]:
        if self.long_lived:  # the job's client process (its arguments name the pipeline) and the server's
            return (f"--pipeline {self.pipeline_name} ", "microingest-spark-connect")
        return (f"microingest-{self.pipeline_name}",)  # the Spark application's name, also when Airflow submits it

    def committed(self) -> tuple[float, int, int]:
        """(epoch of the pipeline's last commit, records read by all its batches, of them decoded in the JVM)."""
        with connection(self.ctx.pg) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT extract(epoch FROM max(committed_at)), coalesce(sum(records_read), 0), "
                "coalesce(sum(decoded_in_jvm), 0) FROM microingest.batches WHERE pipeline = %s",
                (self.pipeline.name,),
            )
            last, records, in_jvm = cur.fetchone()
        return float(last or 0), int(records), int(in_jvm)

    def dead_letters(self) -> int:
        with connection(self.ctx.pg) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM microingest.dead_letters WHERE pipeline = %s", (self.pipeline.name,))
            return cur.fetchone()[0]

    def _timed(self, launch: Callable[[], float | None]) -> Run:
        """`launch` runs the contender to its end; through Airflow it returns when the ingest task started."""
        _, before, jvm_before = self.committed()
        started = time.time()
        ingest_started = launch()
        last, records, in_jvm = self.committed()
        phases = split(started, batch_times(self.ctx.pg, self.pipeline.name, started), ingest_started)
        return Run(last - started, records - before, phases, decoded_in_jvm=in_jvm - jvm_before)


class SparkJobAlone(_Platform):
    key, label = "spark_job", "microingest: the Spark job alone (spark-submit → committed)"
    spark_conn_id = spark_submit.SUBMIT_CONN_ID

    def run(self) -> Run:
        def launch() -> None:
            plan = plan_live_run(self.pipeline)
            env = {**os.environ, **PipelineSystems.of(self.pipeline).as_env()}
            argv = spark_submit.command(
                self.pipeline, plan, RunInfo(), master="local[*]", extra_conf={"spark.ui.enabled": "false"}
            )
            run_logged(argv, env, self.ctx.work_dir / f"{self.key}-{time.time():.0f}.log")

        return self._timed(launch)


class SparkConnectJob(_Platform):
    key, label = "connect_job", "microingest: the job alone on the long-lived Spark Connect driver"

    def run(self) -> Run:
        def launch() -> None:
            plan = plan_live_run(self.pipeline)
            env = {**os.environ, **PipelineSystems.of(self.pipeline).as_env()}
            argv = spark_connect.job_command(self.pipeline, plan, RunInfo())
            run_logged(argv, env, self.ctx.work_dir / f"{self.key}-{time.time():.0f}.log")

        return self._timed(launch)


class ThroughAirflow(_Platform):
    key, label = "airflow", "microingest through Airflow (trigger → committed), the default: the long-lived driver"

    def prepare(self) -> None:
        super().prepare()

        self.client = AirflowClient()

    def wait_until_served(self) -> None:
        self.client.wait_for_dag(self.pipeline.dag_id, timeout=300, say=lambda m: None)
        self.client.unpause(self.pipeline.dag_id)

    def run(self) -> Run:
        def launch() -> float:
            dag_id = self.pipeline.dag_id
            run_id = self.client.trigger(dag_id, {}, note=f"make bench {self.ctx.run_id}")
            run = self.client.wait_for_run(dag_id, run_id, timeout=7200, poll=0.5)
            if run.state != "success":
                raise BenchError(f"{dag_id} run {run_id} ended {run.state} ({run.describe()})")
            tis = self.client.get(f"/api/v2/dags/{quote(dag_id)}/dagRuns/{quote(run_id)}/taskInstances")
            ingest: dict = next((t for t in tis["task_instances"] if t["task_id"] == "ingest"), {})
            if ingest.get("state") != "success":  # e.g. the plan found nothing to read: the bench's data never arrived
                raise BenchError(
                    f"{dag_id} run {run_id} succeeded without running its ingest task "
                    f"(ingest: {ingest.get('state', 'absent')})"
                )
            return datetime.fromisoformat(ingest["start_date"]).timestamp()

        return self._timed(launch)


class WarmUp(ThroughAirflow):
    """Untimed, before the contenders: a long-lived driver and an Airflow in service have run before, so the first
    timed contender should not pay for the server's JIT and Python workers, or the scheduler's first run. Round `n`
    of them (`runner.warm_up`) is a pipeline of its own, reading the dataset's first `records` again."""

    def __init__(self, ctx: Context, records: int, n: int = 1):
        super().__init__(ctx)
        self.key = f"warmup{n}"
        self.label = f"warm-up round {n}: an untimed run through Airflow on the long-lived driver"
        self.max_records_per_run = records


class ThroughAirflowOnSparkSubmit(ThroughAirflow):
    key, label = "airflow_submit", "microingest through Airflow on spark-submit (a Spark application per run)"
    spark_conn_id = spark_submit.SUBMIT_CONN_ID


class ThroughAirflowAvro(ThroughAirflow):
    key, label = "airflow_avro", "microingest through Airflow, the same records as Avro"
    dataset = "avro"


class ThroughAirflowOrders(ThroughAirflow):
    """The shipped orders pipeline's declaration (pipelines/orders.yaml) on the bench's orders, into a plain table
    (the shipped one partitions by day and keeps 90 days; the bench's orders are of 1 January)."""

    key, label = "airflow_orders", "microingest through Airflow, orders (the shipped declaration's types)"
    dataset = "orders"

    def declaration(self) -> dict[str, Any]:
        return orders_declaration(super().declaration())


class KafkaLoop(Contender):
    key, label = "kafka_loop", "hand-written kafka-python → COPY loop, offsets in the same transaction"
    lean = False  # the loop tuned as a user would (bench.kafka_loop --lean)

    def run(self) -> Run:
        _, ends = partition_bounds(self.ctx.kafka, self.topic)
        started = time.time()
        out = run_logged(
            [
                sys.executable,
                "-m",
                "microingest.bench.kafka_loop",
                "--topic",
                self.topic,
                "--table",
                table_name(self.key),
                "--until",
                json.dumps(ends),
                "--batch-records",
                str(self.ctx.batch_records),
                "--name",
                self.markers[0],
            ]
            + (["--lean"] if self.lean else [])
            + (["--orders"] if self.dataset == "orders" else []),
            dict(os.environ),
            self.ctx.work_dir / f"{self.key}-{started:.0f}.log",
        )
        result = json.loads(out.strip().splitlines()[-1])
        return Run(result["done_at"] - started, result["records"], own_peak_rss_mib={"python": result["peak_rss_mib"]})

    def dead_letters(self) -> int:
        with connection(self.ctx.pg) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT count(*) FROM {dead_table(table_name(self.key))} WHERE topic = %s", (self.topic,))
            return cur.fetchone()[0]


class KafkaLoopLean(KafkaLoop):
    key, label = "kafka_loop_lean", "the same loop, lean: each second's timestamp text formatted once"
    lean = True


class KafkaLoopLeanOrders(KafkaLoopLean):
    key, label = "kafka_loop_lean_orders", "the lean loop on orders: Decimal money, arrays and JSON as COPY text"
    dataset = "orders"


class AvailableNow(Contender):
    key, label = "available_now", "Spark Structured Streaming, AvailableNow + foreachBatch (JDBC)"

    def run(self) -> Run:
        started = time.time()
        argv = spark_submit.submit_argv(
            settings.repo_root() / "spark_jobs" / "bench_available_now.py",
            [
                "--topic",
                self.ctx.topic,
                "--table",
                table_name(self.key),
                "--checkpoint",
                str(self.ctx.work_dir / "available_now-checkpoint"),
                "--max-offsets-per-trigger",
                str(self.ctx.batch_records),
            ]
            + (["--iso-timestamps"] if self.ctx.timestamps == "iso" else []),
            self.markers[0],
            "local[*]",
            {"spark.ui.enabled": "false"},
            jars=bench_jars(),
        )
        result = bench_result(run_logged(argv, dict(os.environ), self.ctx.work_dir / f"{self.key}-{started:.0f}.log"))
        return Run(result["done_at"] - started, -1)  # the streaming query reports no count; the target's is checked


def bench_jars() -> list[str]:
    folder = settings.install_dir() / "spark" / "bench-jars"
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise BenchError(f"no PostgreSQL JDBC driver in {folder}; run `make bench` (it resolves it)")
    return jars


CONTENDERS = {
    c.key: c
    for c in (
        ThroughAirflow,
        SparkConnectJob,
        ThroughAirflowOnSparkSubmit,
        SparkJobAlone,
        KafkaLoop,
        KafkaLoopLean,
        AvailableNow,
        ThroughAirflowAvro,
        ThroughAirflowOrders,
        KafkaLoopLeanOrders,
    )
}
