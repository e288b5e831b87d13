"""Where a batch's time goes inside Spark: each stage of the platform's read and decode alone, on the platform's warm
Spark Connect server, for the bench's JSON dataset.

    python -m microingest.bench.engine_probe [--records 100000,500000] [--partitions 6] [--repeat 3]

Each stage runs once untimed, then --repeat times; the report gives the fastest and the median:

- `read_count`: Spark's Kafka source reads the ranges and counts them, nothing downstream;
- `handover`: the batch's frame (as `spark.batch.read_frame` builds it) through a mapInArrow that only counts: the
  JVM → Python worker → JVM hand-over alone;
- `decode`: the reference decoder (`spark.decoder.Decoder`) collected with toArrow(), without the commit;
- `jvm_count`: the records decoded in the JVM as a batch of a JSON pipeline is, and counted there: the decoding
  function's cost without the transfer of its columns;
- `jvm_decode`: the records decoded in the JVM as a batch of a JSON pipeline is (`spark.jvm_decode`) and collected
  with toArrow(): typed columns, the declined and sampled records' bytes;
- `jvm_batch`: the same, streamed to the driver in Arrow chunks and made ready to commit there as a batch is
  (`spark.arrow_chunks`, `spark.jvm_collected`: the sample checked, the rows as binary COPY data, spooled): the JVM
  path's counterpart of `decode`;
- `from_json`: the values decoded by Spark SQL's from_json with the declared types and collected with toArrow():
  the JVM's speed, permissive as from_json is (none of the reference decoder's checks);
- `query`: a query that reads no Kafka (spark.range(100).count()): a round trip to the server and its tasks;
- `small_new_group`, `small_one_group`: 100 records read and counted, the executors' Kafka consumers in a group of
  their own per query (Spark's default), and in one group every query shares (as a batch's are: `batch.reader_group`).

Prints a table; writes probe.json into --out (default: the state folder's bench/). The probe's topic is deleted at
the end.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
from pyspark.sql import functions as F

from microingest import settings
from microingest.batches import Batch, OffsetRange
from microingest.bench.dataset import SCHEMA, create_dataset
from microingest.bench.program_cpu import BENCH, ProgramCpu, programs
from microingest.declare.files import load_pipeline_file
from microingest.decode.records import RecordProcessor
from microingest.spark.arrow_chunks import arrow_chunks
from microingest.spark.batch import kafka_read_options, read_frame
from microingest.spark.connect import PLATFORM_CONN_ID, job_session
from microingest.spark.decoder import DECODED_SCHEMA, Decoder
from microingest.spark.jvm_collected import collected as jvm_collected
from microingest.spark.jvm_decode import JvmDecoding, decoded_frame, prepare, sample_every
from microingest.systems.connections import get_connection, kafka_python_config
from microingest.systems.kafka_access import delete_topic
from microingest.systems.pipeline_systems import PipelineSystems

SMALL = 100
PROBED = ("spark-connect", BENCH)  # the programs whose CPU each stage reports: the server, and the probe (the client)
# The declared types in Spark's DDL; event_time is epoch milliseconds, made a timestamp after parsing.
_SPARK_TYPES = {"string": "STRING", "double": "DOUBLE", "timestamp": "BIGINT"}


def first_records(topic: str, partitions: int, records: int) -> tuple[OffsetRange, ...]:
    """The ranges holding records 0..records-1 of a dataset spread round-robin over the partitions."""
    counts = [len(range(p, records, partitions)) for p in range(partitions)]
    return tuple(OffsetRange(topic, p, 0, n, None) for p, n in enumerate(counts) if n)


def _count_only(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def _timed(stage: Callable[[], int], repeat: int, expected: int) -> dict:
    """The stage's fastest and median seconds, and the median CPU µs per record of the server and of this process
    (the job's client, where a stage collects)."""
    if stage() != expected:  # the warm-up, which also checks the stage saw every record
        raise RuntimeError(f"a stage counted other than {expected} records")
    roots = {name: root for name, root in programs(None).items() if name in PROBED}
    seconds, cpu = [], []
    for _ in range(repeat):
        with ProgramCpu(roots) as spent:
            started = time.perf_counter()
            stage()
            seconds.append(time.perf_counter() - started)
        cpu.append(spent.seconds)
    return {
        "fastest": min(seconds),
        "median": statistics.median(seconds),
        "records": expected,
        **{
            f"{name}_cpu_us": statistics.median(c[name] for c in cpu) * 1e6 / expected if name in roots else None
            for name in PROBED
        },
    }


def stages(
    spark, kafka_options: dict[str, str], decoder: Decoder, jvm: JvmDecoding, batch: Batch
) -> dict[str, Callable[[], int]]:
    def raw():
        return spark.read.format("kafka").options(**kafka_options).options(**kafka_read_options(batch.ranges)).load()

    def from_json() -> int:
        ddl = ", ".join(f"{name} {_SPARK_TYPES[_type(t)]}" for name, t in SCHEMA.items())
        decoded = (
            raw()
            .selectExpr("topic", "partition", "offset", "timestamp", f"from_json(CAST(value AS STRING), '{ddl}') AS v")
            .selectExpr("topic", "partition", "offset", "timestamp", "v.*")
            .withColumn("event_time", F.timestamp_millis(F.col("event_time")))
        )
        return decoded.toArrow().num_rows

    frame = read_frame(spark, kafka_options, batch)
    jvm_frame = decoded_frame(frame, jvm, sample_every(batch.offsets))
    processor = RecordProcessor(decoder.pipeline)

    def jvm_batch() -> int:
        staged = jvm_collected(arrow_chunks(jvm_frame), processor, decoder.batch_id, True, datetime.now(timezone.utc))
        return staged.counts.rows + staged.counts.dead

    return {
        "read_count": lambda: raw().count(),
        "handover": lambda: _sum_n(frame.mapInArrow(_count_only, "n long").toArrow()),
        "decode": lambda: _decoded_records(frame.mapInArrow(decoder, DECODED_SCHEMA).toArrow()),
        "jvm_count": lambda: jvm_frame.agg(F.count("d") + F.count_if(F.col("d").isNull())).first()[0],
        "jvm_decode": lambda: jvm_frame.toArrow().num_rows,
        "jvm_batch": jvm_batch,
        "from_json": from_json,
    }


def small_stages(spark, kafka_options: dict[str, str], batch: Batch) -> dict[str, Callable[[], int]]:
    group = {"kafka.group.id": f"microingest-probe-{uuid.uuid4().hex[:8]}"}

    def read(extra: dict[str, str]) -> int:
        return (
            spark.read.format("kafka")
            .options(**kafka_options)
            .options(**kafka_read_options(batch.ranges))
            .options(**extra)
            .load()
            .count()
        )

    return {
        "query": lambda: spark.range(batch.offsets).count(),
        "small_new_group": lambda: read({}),
        "small_one_group": lambda: read(group),
    }


def _type(declared) -> str:
    return declared["type"] if isinstance(declared, dict) else declared


def _sum_n(table: pa.Table) -> int:
    return sum(table.column("n").to_pylist())


def _decoded_records(table: pa.Table) -> int:
    return sum(table.column("good").to_pylist()) + sum(table.column("bad").to_pylist())


def probe(records: list[int], partitions: int, repeat: int, say: Callable[[str], None]) -> dict:
    kafka = kafka_python_config(get_connection("microingest_kafka"))
    run_id = uuid.uuid4().hex[:8]
    dataset = create_dataset(kafka, f"probe-{run_id}", max(records), partitions, say)
    folder = settings.state_dir() / "bench" / "probe-pipelines"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"probe_{run_id}.yaml"
    path.write_text(
        json.dumps(
            {"name": f"probe_{run_id}", "topic": dataset.topic, "target_table": f"probe_{run_id}", "schema": SCHEMA}
        )
    )
    pipeline = load_pipeline_file(path)
    kafka_options = PipelineSystems.of(pipeline).spark_kafka
    spark = job_session(get_connection(PLATFORM_CONN_ID), f"microingest-probe-{run_id}")
    jvm = prepare(spark, pipeline)
    if jvm is None:
        raise SystemExit("the probe's pipeline cannot be decoded in the JVM here (see the log above)")
    result: dict = {"dataset": dataset.topic, "partitions": partitions, "repeat": repeat, "sizes": {}}
    try:
        for n in sorted(records):
            batch = Batch("ingest", first_records(dataset.topic, partitions, n))
            decoder = Decoder(pipeline, str(uuid.uuid4()), None, into_target=True)
            found = {}
            for name, stage in stages(spark, kafka_options, decoder, jvm, batch).items():
                say(f"{n} records: {name}")
                found[name] = _timed(stage, repeat, n)
            result["sizes"][str(n)] = found
        small = Batch("ingest", first_records(dataset.topic, partitions, SMALL))
        result["small"] = {}
        for name, stage in small_stages(spark, kafka_options, small).items():
            say(f"{SMALL} records: {name}")
            result["small"][name] = _timed(stage, repeat, SMALL)
    finally:
        spark.stop()
        path.unlink(missing_ok=True)
        delete_topic(kafka, dataset.topic)
    return result


def table(result: dict) -> str:
    lines = [
        "| records | stage | fastest s | median s | records/s (fastest) | server CPU µs/record "
        "| client CPU µs/record |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for n, found in [*result["sizes"].items(), (str(SMALL), result["small"])]:
        for name, m in found.items():
            lines.append(
                f"| {n} | {name} | {m['fastest']:.3f} | {m['median']:.3f} | {m['records'] / m['fastest']:,.0f} | "
                + " | ".join("–" if m[f"{p}_cpu_us"] is None else f"{m[f'{p}_cpu_us']:.1f}" for p in PROBED)
                + " |"
            )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m microingest.bench.engine_probe", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--records", default="100000,500000", help="comma-separated batch sizes")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=settings.state_dir() / "bench")
    args = parser.parse_args(argv)
    records = [int(n) for n in args.records.split(",") if n]
    if not records or min(records) < SMALL or args.partitions < 1 or args.repeat < 1:
        parser.error(f"--records of at least {SMALL} each, --partitions and --repeat at least 1")
    result = probe(records, args.partitions, args.repeat, say=lambda m: print(m, flush=True))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "probe.json").write_text(json.dumps(result, indent=2))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
