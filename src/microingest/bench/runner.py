"""One bench run: the dataset, the limits, every contender on the large backlog, then small batches, each checked
for exactly what it should have landed. Measurements go to the report and the chart."""

from __future__ import annotations

import os
import platform
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import pyspark

from microingest import settings
from microingest.bench import limits, program_cpu
from microingest.bench.avro_dataset import avro_values, register
from microingest.bench.contenders import CONTENDERS, BenchError, Contender, Context, Run, ThroughAirflow, WarmUp
from microingest.bench.dataset import (
    MALFORMED_SHARE,
    VALUE_COLUMNS,
    VALUES,
    Dataset,
    create_dataset,
    dataset_topic,
    produce_range,
)
from microingest.bench.kafka_loop import ORDER_COLUMNS
from microingest.bench.machine_cpu import IDLE_SECONDS, MachineCpu, idle_rate
from microingest.bench.memory import PeakMemory
from microingest.bench.orders_dataset import order_headers, order_value_bytes
from microingest.bench.phases import median_split
from microingest.bench.postgres_cpu import PostgresCpu, postmaster
from microingest.bench.program_cpu import ProgramCpu, without_sampler
from microingest.bench.targets import ORDERS_EXPECTED, create_targets, landed, load_expected_orders, wrong_values
from microingest.systems.connections import get_connection, kafka_python_config, postgres_params, schema_registry_config
from microingest.systems.postgres import connection

# The long-lived driver in service has read millions of records: its JIT has compiled the whole read and decode.
# A server started for the bench gets closer in untimed runs of up to WARM_UP_RECORDS each, through Airflow. Over
# eight such runs the machine's CPU per record fell by more than half in the first three and by a further quarter,
# unevenly, in the next five (docs/performance.md, "The server's JVM"): a rule stopping at the first run no cheaper
# than the one before stopped at the third on one day's noise, so the bench runs a fixed number.
WARM_UP_RECORDS = 500_000
WARM_UP_ROUNDS = 6


@dataclass(frozen=True)
class Options:
    records: int = 1_000_000
    partitions: int = 6
    batch_records: int = 100_000  # the platform's max_records_per_batch, the loop's batch, maxOffsetsPerTrigger
    small_records: int = 100
    small_batches: int = 3
    contenders: tuple[str, ...] = tuple(CONTENDERS)
    out: Path = Path(".state/bench")
    warm_up_records: int | None = None  # None: min(records, WARM_UP_RECORDS); 0: no warm-up (a smoke run)
    timestamps: str = "iso"  # the JSON events' event_time: ISO-8601 text or epoch milliseconds (dataset.TIMESTAMPS)
    malformed_share: float = MALFORMED_SHARE  # of the records, cut off halfway: dead letters, not rows


@dataclass
class Measurement:
    key: str
    label: str
    family: str  # microingest | alternative | limit
    records: int
    seconds: float
    rows: int = 0  # what the target holds afterwards ...
    distinct: int = 0  # ... and its distinct source positions
    expected: int = 0  # what it should hold
    wrong_times: int = 0  # rows whose event_time is not the instant the record was given
    wrong_values: int = 0  # rows whose values are not those the record was made of
    dataset: str = "json"  # what it read (dataset.KINDS)
    dead_letters: int | None = None  # malformed records the contender kept aside (None: it drops them) ...
    expected_dead: int = 0  # ... and how many there were
    cpu_seconds: float | None = None  # the whole machine's CPU on the backlog run, the idle platform's taken off
    decoded_in_jvm: int | None = None  # the platform's: records of the backlog run its JVM decoder read
    peak_mib: dict[str, float] = field(default_factory=dict)  # role -> peak PSS the sampler saw (bench.memory)
    postgres_cpu_seconds: float | None = None  # the local cluster's CPU during the run (bench.postgres_cpu)
    cpu_by_program: dict[str, float] = field(default_factory=dict)  # program -> CPU seconds (bench.program_cpu)
    own_peak_rss_mib: dict[str, float] = field(default_factory=dict)  # role -> what the contender measured itself
    small_seconds: list[float] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # the platform's contenders: the backlog run by phase ...
    small_phases: list[dict[str, float]] = field(default_factory=list)  # ... and each small batch's

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0

    @property
    def exact(self) -> bool:
        kept_aside = self.dead_letters is None or self.dead_letters == self.expected_dead
        exact_rows = self.wrong_times == 0 and self.wrong_values == 0
        return self.rows == self.distinct == self.expected and exact_rows and kept_aside

    @property
    def small_median(self) -> float | None:
        return statistics.median(self.small_seconds) if self.small_seconds else None

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "rate": round(self.rate, 1),
            "exact": self.exact,
            "small_median": self.small_median,
            "small_phases_median": median_split(self.small_phases),
        }


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
    }


def run_bench(opts: Options, say: Callable[[str], None] = print) -> dict:
    unknown = [c for c in opts.contenders if c not in CONTENDERS]
    if unknown:
        raise BenchError(f"unknown contender(s) {', '.join(unknown)}; choose from {', '.join(CONTENDERS)}")
    pg = postgres_params(get_connection("microingest_postgres"))
    kafka = kafka_python_config(get_connection("microingest_kafka"))
    started = datetime.now(timezone.utc)
    run_id = started.strftime("%m%d%H%M%S")
    work = opts.out / "work" / run_id  # job logs and the streaming contender's checkpoint
    work.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        pg, kafka, f"microingest-bench-{run_id}", run_id, opts.batch_records, work.resolve(), say, opts.timestamps
    )
    _forget_earlier_declarations()
    contenders = [CONTENDERS[key](ctx) for key in opts.contenders]
    warm_records = min(opts.records, WARM_UP_RECORDS) if opts.warm_up_records is None else opts.warm_up_records
    warm_ups = (
        [WarmUp(ctx, warm_records, n) for n in range(1, WARM_UP_ROUNDS + 1)]
        if warm_records and any(c.long_lived for c in contenders)
        else []
    )
    create_targets(
        pg,
        [c.key for c in contenders if c.dataset != "orders"] + [limits.COPY_KEY] + [w.key for w in warm_ups],
        [c.key for c in contenders if c.dataset == "orders"] + [ORDERS_EXPECTED],
    )
    for c in contenders + warm_ups:
        c.prepare()  # declarations first: Airflow parses them while the data is produced
    datasets = _produce(ctx, opts, {c.dataset for c in contenders})
    dataset = datasets["json"]
    for c in contenders + warm_ups:
        if isinstance(c, ThroughAirflow):
            say(f"waiting for Airflow to serve the DAG of {c.pipeline_name}")
            c.wait_until_served()
    warm_up_cpu = warm_up(warm_ups, pg, opts.partitions, say)
    for w in warm_ups:
        w.withdraw()
    say(f"the idle platform's CPU, watched for {IDLE_SECONDS:g}s ...")
    roots = program_cpu.programs(pg["port"])
    with ProgramCpu(roots) as quiet:
        idle = idle_rate()
    program_idle = quiet.rates()
    say(f"  {idle:.2f} CPU seconds per second, taken off each contender's")

    results: list[Measurement] = []
    for key, measure in ((limits.COUNT_KEY, limits.spark_count), (limits.COPY_KEY, limits.copy_limit)):
        say(f"{limits.LABELS[key]} ...")
        with (
            PeakMemory((f"bench-{run_id}-{key}",)) as memory,
            PostgresCpu(postmaster(pg["port"])) as cpu,
            ProgramCpu(roots, program_idle) as by_program,
            MachineCpu(idle) as machine_cpu,
        ):
            run = measure(ctx, dataset)
        m = Measurement(
            key,
            limits.LABELS[key],
            "limit",
            run.records,
            run.seconds,
            peak_mib=memory.peaks.to_dict(),
            postgres_cpu_seconds=cpu.seconds,
        )
        m.cpu_seconds, m.cpu_by_program = without_sampler(machine_cpu.seconds, by_program.seconds, memory.cpu_seconds)
        m.rows = m.distinct = m.expected = run.records  # checked below where there is a target
        if key == limits.COPY_KEY:
            m.rows, m.distinct, m.wrong_times = landed(pg, key, opts.partitions)
            m.expected = dataset.records - dataset.malformed(dataset.records)
        results.append(m)
        say(f"  {m.rate:,.0f} records/s ({m.seconds:.1f}s)")

    for c in contenders:
        say(f"{c.label}: {dataset.records:,} records ...")
        with (
            PeakMemory(c.markers) as memory,
            PostgresCpu(postmaster(pg["port"])) as cpu,
            ProgramCpu(roots, program_idle) as by_program,
            MachineCpu(idle) as machine_cpu,
        ):
            run = c.run()
        m = _measured(c, run, datasets[c.dataset], dataset.records, pg)
        m.cpu_seconds, m.cpu_by_program = without_sampler(machine_cpu.seconds, by_program.seconds, memory.cpu_seconds)
        m.postgres_cpu_seconds, m.decoded_in_jvm = cpu.seconds, run.decoded_in_jvm
        m.peak_mib, m.own_peak_rss_mib, m.phases = memory.peaks.to_dict(), run.own_peak_rss_mib, run.phases
        results.append(m)
        say(
            f"  {m.rate:,.0f} records/s ({m.seconds:.1f}s), target holds {m.rows:,} rows "
            f"({'exact' if m.exact else 'WRONG'})"
        )

    by_key = {m.key: m for m in results}
    for k in range(opts.small_batches):
        start = dataset.records + k * opts.small_records
        for produced in datasets.values():
            produce_range(
                kafka,
                produced.topic,
                opts.partitions,
                produced.base_ts_ms,
                start,
                opts.small_records,
                value=produced.value,
                headers=produced.headers,
            )
        for c in contenders:
            run = c.run()
            m = by_key[c.key]
            m.small_seconds.append(round(run.seconds, 2))
            if run.phases:
                m.small_phases.append(run.phases)
            _expect(m, c, datasets[c.dataset], start + opts.small_records, pg)
            say(
                f"{c.key}: {opts.small_records}-record batch {k + 1} of {opts.small_batches} committed "
                f"{run.seconds:.1f}s after launch ({'exact' if m.exact else 'WRONG'})"
            )
    return {
        "run_id": run_id,
        "started": started.isoformat(timespec="seconds"),
        "options": {**asdict(opts), "out": str(opts.out)},
        "topic": ctx.topic,
        "record_bytes": {fmt: round(d.record_bytes, 1) for fmt, d in datasets.items()},
        "warm_up_records": warm_records if warm_ups else 0,
        "warm_up_cpu_us_per_record": warm_up_cpu,
        "machine": {**machine(), "postgres": _pg_version(pg)},
        "measurements": [m.to_dict() for m in results],
    }


def warm_up(rounds: list[WarmUp], pg: dict, partitions: int, say: Callable[[str], None]) -> list[float]:
    """The rounds run one after the other, each checked for what it landed; the machine's CPU µs per record of
    each."""
    costs: list[float] = []
    for w in rounds:
        say(f"{w.label}: {w.max_records_per_run:,} records ...")
        with MachineCpu(0.0) as cpu:
            run = w.run()
        # The records it read are the first of each partition, not records 0..n-1: each is a row or a dead letter.
        rows, distinct, wrong_times = landed(pg, w.key, partitions)
        dead = w.dead_letters()
        if wrong_times or run.records != w.max_records_per_run or not rows == distinct == run.records - dead:
            raise BenchError(
                f"{w.label} read {run.records:,} records and its target holds {rows:,} rows, "
                f"{distinct:,} positions, {wrong_times:,} wrong event times, and {dead:,} dead letters; expected "
                f"{w.max_records_per_run:,} records in all"
            )
        costs.append(round(cpu.seconds / run.records * 1e6, 1))
        say(f"  {run.seconds:.1f}s, {costs[-1]:.1f} CPU µs per record, not timed")
    return costs


def _produce(ctx: Context, opts: Options, kinds: set[str]) -> dict[str, Dataset]:
    """The JSON events (the limits read them) and each other dataset a contender reads, record i at the same place
    in each (`dataset`); the orders' expected values loaded beside them."""
    say, kafka = ctx.say, ctx.kafka
    say(f"producing {opts.records:,} records into {ctx.topic} ({opts.partitions} partitions, {opts.timestamps} times)")
    say(f"  {opts.malformed_share:.2%} of them malformed (cut off halfway)")
    datasets = {
        "json": create_dataset(
            kafka, ctx.topic, opts.records, opts.partitions, say, VALUES[opts.timestamps], opts.malformed_share
        )
    }
    if "avro" in kinds:
        topic = dataset_topic(ctx.topic, "avro")
        say(f"producing the same {opts.records:,} records as Avro into {topic}")
        schema_id = register(schema_registry_config(get_connection("microingest_schema_registry")), topic)
        datasets["avro"] = create_dataset(
            kafka, topic, opts.records, opts.partitions, say, avro_values(schema_id), opts.malformed_share
        )
    if "orders" in kinds:
        topic = dataset_topic(ctx.topic, "orders")
        say(f"producing {opts.records:,} orders into {topic}")
        orders = create_dataset(
            kafka, topic, opts.records, opts.partitions, say, order_value_bytes, opts.malformed_share, order_headers
        )
        load_expected_orders(ctx.pg, orders)
        datasets["orders"] = orders
    return datasets


def _measured(c: Contender, run: Run, dataset: Dataset, records: int, pg: dict) -> Measurement:
    m = Measurement(c.key, c.label, c.family, run.records, run.seconds, dataset=c.dataset)
    _expect(m, c, dataset, records, pg)
    if run.records < 0:  # the streaming contender counts nothing: what it consumed is what its target holds
        m.records = m.rows + dataset.malformed(records)
    return m


def _expect(m: Measurement, c: Contender, dataset: Dataset, records: int, pg: dict) -> None:
    """What `c` landed of records 0..records-1, and what it should have: a row for each well-formed record, a dead
    letter for each malformed one, each value as the record was made."""
    m.expected_dead = dataset.malformed(records)
    m.expected = records - m.expected_dead
    m.rows, m.distinct, m.wrong_times = landed(pg, c.key, dataset.partitions, c.time_column)
    m.dead_letters = c.dead_letters()
    if c.dataset == "orders":
        m.wrong_values = wrong_values(pg, c.key, ORDERS_EXPECTED, ORDER_COLUMNS)
    else:
        m.wrong_values = wrong_values(pg, c.key, limits.COPY_KEY, VALUE_COLUMNS)


def _forget_earlier_declarations() -> None:
    """Earlier bench runs' pipelines stop being served (their DAGs go stale); their targets are recreated."""
    for path in settings.pipelines_dir().glob("bench_*.yaml"):
        path.unlink()


def _pg_version(pg: dict) -> str:
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute("SHOW server_version")
        return cur.fetchone()[0]
