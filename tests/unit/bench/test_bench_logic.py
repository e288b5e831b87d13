"""The bench's pure pieces: its data decodes on the platform to exactly the rows the COPY limit loads, and its report
judges the targets from the figures."""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
import uuid

import pytest

from microingest.bench import phases, report
from microingest.bench.dataset import (
    COPY_BATCH_ID,
    SCHEMA,
    Dataset,
    event,
    is_malformed,
    iso_value_bytes,
    malformed_in,
    value_bytes,
    with_malformed,
    write_copy_rows,
)
from microingest.bench.kafka_loop import ORDER_COLUMNS
from microingest.bench.memory import PeakMemory
from microingest.bench.orders_dataset import expected_row, order_headers, order_value_bytes, orders_declaration
from microingest.declare.validate import parse_pipeline
from microingest.decode.codec import copy_text_row
from microingest.decode.json_values import json_text
from microingest.decode.records import BadRecord, RecordProcessor


def test_records_are_about_200_bytes_and_deterministic():
    sizes = [len(value_bytes(i)) for i in range(0, 1_000_000, 997)]
    assert 190 <= sum(sizes) / len(sizes) <= 230
    assert value_bytes(123) == value_bytes(123) and event(1) != event(2)


def test_the_copy_limit_loads_what_the_platform_decodes_from_the_same_records():
    pipeline = parse_pipeline({"name": "bench_check", "topic": "t", "target_table": "bench.x", "schema": SCHEMA})
    processor = RecordProcessor(pipeline)
    dataset = Dataset("t", 3, 50, {0: 17, 1: 17, 2: 16}, base_ts_ms=1_800_000_000_000)
    out = io.StringIO()
    write_copy_rows(dataset, out)
    lines = out.getvalue().splitlines(keepends=True)
    assert len(lines) == 50
    for i, line in enumerate(lines):
        _record_key, _tombstone, *values = processor.process(f"ev-{i:012d}".encode(), value_bytes(i))
        head = line.split("\t")[:5]
        assert head[:3] == ["t", str(i % 3), str(i // 3)] and head[4] == COPY_BATCH_ID
        assert "\t".join(line.split("\t")[5:]) == copy_text_row(values), i


@pytest.mark.parametrize("share", [0.004, 0.01, 0.05, 1 / 3])
def test_malformed_records_are_spread_evenly_and_counted_exactly_in_any_prefix(share):
    flags = [is_malformed(i, share) for i in range(20_000)]
    for n in (0, 1, 249, 250, 251, 999, 1000, 12_345, 20_000):
        assert sum(flags[:n]) == malformed_in(n, share), n
    gaps = [b - a for a, b in itertools.pairwise(i for i, f in enumerate(flags) if f)]
    assert max(gaps) - min(gaps) <= 1  # evenly: no stretch of the data without one, none with a cluster


def test_a_malformed_record_is_a_dead_letter_on_the_platform_and_not_in_the_copy_limits_rows():
    pipeline = parse_pipeline({"name": "bench_check", "topic": "t", "target_table": "bench.x", "schema": SCHEMA})
    processor = RecordProcessor(pipeline)
    value = with_malformed(iso_value_bytes, 0.01)
    bad = [i for i in range(1000) if is_malformed(i, 0.01)]
    assert len(bad) == 10
    for i in bad:
        with pytest.raises(BadRecord):
            processor.process(b"k", value(i))
    dataset = Dataset("t", 3, 1000, {}, base_ts_ms=1_800_000_000_000, value=value, malformed_share=0.01)
    out = io.StringIO()
    write_copy_rows(dataset, out)
    positions = [(int(line.split("\t")[1]), int(line.split("\t")[2])) for line in out.getvalue().splitlines()]
    assert len(positions) == 990 == 1000 - dataset.malformed(1000)
    assert not {(i % 3, i // 3) for i in bad} & set(positions)


def _report(**rates) -> dict:
    ms = [
        {
            "key": k,
            "label": k,
            "family": "limit" if k in ("copy_limit", "spark_count") else "x",
            "rate": r,
            "records": 1000,
            "seconds": 1000 / r,
            "rows": 1000,
            "distinct": 1000,
            "expected": 1000,
            "exact": True,
            "peak_mib": {},
            "small_median": None,
            "small_seconds": [],
        }
        for k, r in rates.items()
    ]
    return {
        "run_id": "1",
        "started": "now",
        "topic": "t",
        "record_bytes": {"json": 200.0},
        "options": {"records": 1000, "partitions": 6, "batch_records": 100, "small_records": 100, "small_batches": 0},
        "machine": {"cpus": 2, "memory_gib": 24, "postgres": "15", "pyspark": "4", "python": "3"},
        "measurements": ms,
    }


def test_targets_are_judged_from_the_ratios_with_the_margin_of_a_miss():
    r = _report(copy_limit=400_000, airflow=140_000, kafka_loop=50_000, kafka_loop_lean=100_000, available_now=100_000)
    r["measurements"][0]["postgres_cpu_seconds"], r["measurements"][1]["postgres_cpu_seconds"] = 0.010, 0.015
    verdicts = {goal: (measured, verdict) for goal, measured, verdict in report.targets(r)}
    assert verdicts["end to end ≥ 0.5× the COPY limit, through Airflow on the long-lived driver"] == (
        "0.35×",
        "missed: 70% of the target",
    )
    assert verdicts["≥ 1× the lean hand-written loop, through Airflow on the long-lived driver"] == ("1.40×", "met")
    assert verdicts["Postgres CPU per record ≤ 1.3× the COPY limit's, through Airflow on the long-lived driver"] == (
        "1.50×",
        "missed by 0.20×",
    )
    row = next(line for line in report.markdown(r).splitlines() if line.startswith("| airflow |"))
    assert "| 15.0 |" in row  # µs of Postgres CPU per record
    assert verdicts["≥ 1.5× AvailableNow + foreachBatch, through Airflow on the long-lived driver"] == (
        "1.40×",
        "missed: 93% of the target",
    )
    assert not any(goal.endswith("through Airflow on spark-submit") for goal in verdicts)  # not in this run


def test_avro_is_judged_against_json_through_airflow_on_the_same_driver():
    r = _report(copy_limit=400_000, airflow=20_000, airflow_avro=15_000, airflow_submit=10_000)
    r["measurements"][2]["phases"] = {"airflow": 1.0, "job_start": 1.0, "decode": 7.0, "commit": 1.0}
    r["record_bytes"]["avro"] = 120.0
    verdicts = {goal: (measured, verdict) for goal, measured, verdict in report.targets(r)}
    assert verdicts["Avro ≥ the JSON figure, through Airflow on the long-lived driver"] == (
        "0.75×",
        "missed: 75% of the target; its time: read and decode 70%, Airflow 10%, job start 10%, commits 10%",
    )
    assert not any(goal.startswith("Avro") and goal.endswith("spark-submit") for goal in verdicts)
    assert "(and the same as Avro of 120 bytes, topic `t-avro`)" in report.markdown(r)


def test_cpu_per_record_of_all_processes_is_judged_against_the_lean_loops_with_the_jvm_share_shown():
    r = _report(copy_limit=400_000, airflow=20_000, kafka_loop_lean=25_000)
    ours, loop = r["measurements"][1], r["measurements"][2]
    ours.update(cpu_seconds=0.030, decoded_in_jvm=996, dead_letters=4, expected_dead=4)
    loop.update(cpu_seconds=0.020, dead_letters=4, expected_dead=4)
    verdicts = {goal: (measured, verdict) for goal, measured, verdict in report.targets(r)}
    assert verdicts[
        "CPU per record (all processes) ≤ 1.2× the lean loop's, through Airflow on the long-lived driver"
    ] == ("1.50×", "missed by 0.30×")
    assert verdicts["≥ 1× the lean hand-written loop, through Airflow on the long-lived driver"] == (
        "0.80×",
        "missed: 80% of the target",
    )
    rows = {line.split(" | ")[0]: line for line in report.markdown(r).splitlines() if line.startswith("| ")}
    assert "| 30.0 | – | 100% |" in rows["| airflow"]  # µs of all CPU per record, no Postgres figure, JVM share
    assert rows["| kafka_loop_lean"].endswith("| 1,000 rows, 4 dead letters, exact |")


def test_a_contender_that_landed_the_wrong_rows_is_marked_in_the_table():
    r = _report(copy_limit=400_000, airflow=140_000)
    r["measurements"][1].update(rows=1001, distinct=1000, wrong_values=2, exact=False)
    table = report.markdown(r)
    assert "**WRONG**: 1,001 rows, 1,000 positions, 2 with other values, 0 with another time; expected 1,000" in table
    assert "| not measured in this run | – |" in table  # no loop in this run


def test_the_small_batch_target_is_judged_on_the_long_lived_driver_through_airflow():
    r = _report(copy_limit=400_000, airflow_submit=140_000, airflow=150_000)
    goal = "100-record batch trigger → committed ≤ 1.5 s, on the long-lived driver"
    r["measurements"][1]["small_median"] = 30.0  # a Spark application per run: not what the target is about
    r["measurements"][2]["small_median"] = 4.4
    assert {g: (m, v) for g, m, v in report.targets(r)}[goal] == ("4.4s", "missed by 2.9s")
    r["measurements"][2]["small_median"] = 1.5
    assert {g: (m, v) for g, m, v in report.targets(r)}[goal] == ("1.5s", "met")


def test_a_runs_phases_add_up_to_launch_to_last_commit():
    batches = [(102.0, 106.0, 107.0), (107.5, 111.5, 112.5)]  # (started, decoded, committed)
    through_airflow = phases.split(100.0, batches, ingest_started=101.0)
    assert through_airflow == {"airflow": 1.0, "job_start": 1.0, "decode": 8.0, "commit": 2.0, "between": 0.5}
    assert sum(through_airflow.values()) == 112.5 - 100.0
    alone = phases.split(100.0, batches)
    assert alone == {"job_start": 2.0, "decode": 8.0, "commit": 2.0, "between": 0.5}
    assert phases.split(100.0, []) == {}
    assert phases.bottleneck(alone) == "read and decode 64%, job start 16%, commits 16%, between batches 4%"
    assert phases.median_split(
        [{"job_start": 1.0, "decode": 3.0}, {"job_start": 2.0, "decode": 1.0}, {"job_start": 9.0, "decode": 2.0}]
    ) == {"job_start": 2.0, "decode": 2.0}


def test_a_missed_target_says_where_the_time_went():
    r = _report(copy_limit=400_000, airflow_submit=140_000, airflow=1_000)
    submit, ours = r["measurements"][1], r["measurements"][2]
    submit["phases"] = {"airflow": 1.0, "job_start": 2.0, "decode": 6.0, "commit": 1.0, "between": 0.0}
    ours.update(small_median=3.4, small_phases_median={"airflow": 1.2, "job_start": 1.6, "decode": 0.5, "commit": 0.1})
    r["options"]["small_batches"] = 3
    verdicts = {goal: verdict for goal, _, verdict in report.targets(r)}
    assert verdicts["end to end ≥ 0.5× the COPY limit, through Airflow on spark-submit"] == (
        "missed: 70% of the target; its time: read and decode 60%, job start 20%, Airflow 10%, commits 10%"
    )
    assert verdicts["end to end ≥ 0.5× the COPY limit, through Airflow on the long-lived driver"] == (
        "missed: 0% of the target"
    )
    assert verdicts["100-record batch trigger → committed ≤ 1.5 s, on the long-lived driver"] == (
        "missed by 1.9s; its time: Airflow 1.2s, job start 1.6s, read and decode 0.5s, commits 0.1s"
    )
    table = report.markdown(r)
    assert "| airflow_submit | 1,000 records | 1.0s | 2.0s | 6.0s | 1.0s | 0.0s | 10.0s |" in table
    assert "| airflow | 100-record batch (median) | 1.2s | 1.6s | 0.5s | 0.1s | – | 3.4s |" in table


def test_a_contenders_own_peak_is_shown_marked_and_the_sampled_one_otherwise():
    r = _report(copy_limit=400_000, kafka_loop=50_000)
    r["measurements"][0]["peak_mib"] = {"postgres": 70.0}
    r["measurements"][1].update(peak_mib={"python": 48.0, "postgres": 59.0}, own_peak_rss_mib={"python": 61.4})
    rows = {line.split(" | ")[0]: line for line in report.markdown(r).splitlines() if line.startswith("| ")}
    assert rows["| copy_limit"].endswith("| – | – | 70 | 1,000 rows, exact |")
    assert rows["| kafka_loop"].endswith("| – | 61† | 59 | 1,000 rows, exact |")
    assert "A figure marked † is the peak RSS that the contender's own process measured" in report.markdown(r)


def test_the_memory_sampler_looks_at_a_contenders_start_and_end_whatever_its_interval():
    """With an interval no run reaches, only the samples at entry and exit can see a process."""
    marker = f"peak-memory-test-{uuid.uuid4().hex}"
    argv = [sys.executable, "-c", "import time; time.sleep(600)", marker]
    gone_before_the_end = subprocess.Popen(argv)
    try:
        with PeakMemory((marker,), interval=3600) as memory:
            gone_before_the_end.kill()
            gone_before_the_end.wait()
        assert memory.peaks.mib.get("python", 0) > 0, "sampled at entry"
    finally:
        gone_before_the_end.kill()

    with PeakMemory((marker,), interval=3600) as memory:
        started_after_the_start = subprocess.Popen(argv)
    try:
        assert memory.peaks.mib.get("python", 0) > 0, "sampled at exit"
    finally:
        started_after_the_start.kill()
        started_after_the_start.wait()


def test_the_orders_expected_values_are_what_the_reference_decodes_from_each_order():
    """`targets.ORDERS_EXPECTED` is loaded from `expected_row`, the values an order was made of; every contender's
    orders are checked against it, so it must be what the platform's reference decoder reads from the same record."""
    declared = orders_declaration({"name": "bench_orders_check", "topic": "t", "target_table": "bench.x"})
    processor = RecordProcessor(parse_pipeline(declared))
    assert processor.names == ORDER_COLUMNS  # the lean loop's COPY columns, in the declaration's order
    for i in range(0, 5000, 7):
        _record_key, _tombstone, *values = processor.process(b"k", order_value_bytes(i), order_headers(i))
        order_id, placed_at, total, currency, shipped_on, customer, tier, skus, prices, attributes, trace = values
        as_made = expected_row(i)
        assert (str(order_id), placed_at, total, currency, str(shipped_on), customer, tier) == as_made[:7], i
        assert total.as_tuple() == as_made[2].as_tuple()  # digit for digit, the scale too
        assert "{" + ",".join(skus) + "}" == as_made[7] and "{" + ",".join(map(str, prices)) + "}" == as_made[8], i
        assert (json_text(attributes), trace) == as_made[9:], i
