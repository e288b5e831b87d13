"""`make bench` as a smoke: every contender and limit once, on a few thousand records, through the same entry point.

It asserts what the report says, never how fast anything was: that each contender landed exactly what it read, that
the platform's runs were cut into the planned batches, and that the ratios in the Markdown are those of the figures.
The warm-up and the small batches' latencies are `make bench`'s (their judgment is unit-tested in bench/).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid

import pytest

from microingest.bench.contenders import CONTENDERS
from microingest.bench.dataset import (
    MALFORMED_SHARE,
    VALUE_COLUMNS,
    first_timestamp_ms,
    malformed_in,
    produce_range,
)
from microingest.bench.kafka_loop import ORDER_COLUMNS
from microingest.bench.limits import COPY_KEY, COUNT_KEY
from microingest.bench.targets import ORDERS_EXPECTED, wrong_values
from microingest.systems.kafka_access import create_topic, partition_bounds
from microingest.systems.postgres import connection

RECORDS, BATCH = 2000, 800
MALFORMED = malformed_in(RECORDS, MALFORMED_SHARE)
GOOD = RECORDS - MALFORMED


def test_a_small_bench_writes_a_report_whose_every_figure_checks_out(tmp_path, pg):
    out = tmp_path / "bench"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "microingest.bench",
            "--records",
            str(RECORDS),
            "--partitions",
            "2",
            "--batch-records",
            str(BATCH),
            "--small-batches",
            "0",
            "--warm-up-records",
            "0",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((out / "report.json").read_text())
    found = {m["key"]: m for m in report["measurements"]}
    assert list(found) == [COUNT_KEY, COPY_KEY, *CONTENDERS]
    assert report["warm_up_records"] == 0
    assert report["options"]["timestamps"] == "iso"  # as most JSON producers write a time

    assert report["options"]["malformed_share"] == MALFORMED_SHARE
    assert found[COUNT_KEY]["records"] == RECORDS
    assert (found[COPY_KEY]["rows"], found[COPY_KEY]["distinct"]) == (GOOD, GOOD)
    for key in CONTENDERS:
        m = found[key]
        assert (m["rows"], m["distinct"], m["expected"], m["wrong_times"]) == (GOOD, GOOD, GOOD, 0), m
        # Each malformed record kept aside, as a dead letter with its reason (AvailableNow's from_json drops them)
        assert m["dead_letters"] == (None if key == "available_now" else MALFORMED) and m["exact"], m
        assert m["records"] == RECORDS and m["seconds"] > 0 and m["small_seconds"] == [], m
        assert abs(m["rate"] - m["records"] / m["seconds"]) < 0.1
        assert m["peak_mib"].get("postgres", 0) > 0, m  # sampled before each contender starts: always there
        assert m["postgres_cpu_seconds"] >= 0, m  # read from the local cluster's accounting (CPU ticks: maybe 0)
        # The whole machine's, less the idle platform's rate: a figure for each (a short run beside a busy machine may
        # leave nothing above that rate, so its size is not asserted)
        assert m["cpu_seconds"] >= 0, m
        # The batch history's count of records the JVM decoded: every well-formed one (malformed: the reference's)
        assert m["decoded_in_jvm"] == (GOOD if m["family"] == "microingest" else None), m
    for key in ("airflow_submit", "spark_job", "available_now"):
        # A Spark application's JVM lives for seconds (its own start alone), many of the sampler's intervals.
        assert found[key]["peak_mib"].get("spark_jvm", 0) > 0, found[key]
    # The loop's process can end between two samples on a fast machine (2,000 records): it measures its own peak.
    for key in ("kafka_loop", "kafka_loop_lean"):
        assert found[key]["own_peak_rss_mib"]["python"] > 0, found[key]

    for m in found.values():  # the platform's time, phase by phase, adds up to what was measured
        if m["family"] == "microingest":
            assert abs(sum(m["phases"].values()) - m["seconds"]) < 0.02 and m["phases"]["decode"] > 0, m
            assert ("airflow" in m["phases"]) == m["key"].startswith("airflow"), m
    for key in ("airflow", "spark_job"):  # 2000 records at 800 a batch
        with connection(pg) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT records_read FROM microingest.batches WHERE pipeline = %s ORDER BY committed_at",
                (f"bench_{report['run_id']}_{key}",),
            )
            assert [b[0] for b in cur.fetchall()] == [800, 800, 400]

    with connection(pg) as conn, conn.cursor() as cur:  # the Avro dataset is the same records, landed the same
        values = ", ".join(["source_partition", "source_offset", *VALUE_COLUMNS])
        cur.execute(
            f"SELECT count(*) FROM ((SELECT {values} FROM bench.airflow EXCEPT SELECT {values} FROM "
            f"bench.airflow_avro) UNION ALL (SELECT {values} FROM bench.airflow_avro EXCEPT "
            f"SELECT {values} FROM bench.airflow)) differ"
        )
        assert cur.fetchone()[0] == 0

    # The orders' check holds every value to what the order was made of: one total off by a cent is found.
    with connection(pg) as conn, conn, conn.cursor() as cur:
        cur.execute("UPDATE bench.airflow_orders SET total = total + 0.01 WHERE source_offset = 7")
        assert cur.rowcount == 2  # one per partition
    assert wrong_values(pg, "airflow_orders", ORDERS_EXPECTED, ORDER_COLUMNS) == 2

    markdown = (out / "report.md").read_text()
    copy_rate = found[COPY_KEY]["rate"]
    for m in report["measurements"]:
        row = next(line for line in markdown.splitlines() if line.startswith(f"| {m['label']} |"))
        assert f"| {m['rate']:,.0f} |" in row and f"| {m['rate'] / copy_rate:.2f}× |" in row, row
        assert "exact" in row and "WRONG" not in row
        for role, mib in m["own_peak_rss_mib"].items():  # the contender's own figure, marked, over the sampler's
            assert f"| {mib:,.0f}† |" in row, (role, row)
    for how in ("spark-submit", "the long-lived driver"):
        assert re.search(
            rf"\| end to end ≥ 0\.5× the COPY limit, through Airflow on {how} \| \d+\.\d\d× \| "
            "(met|missed)",
            markdown,
        )
    assert "## Where the platform's time goes" in markdown
    png = (out / "chart.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000


def test_the_dataset_fails_on_a_refused_record_and_stamps_every_record_in_the_past(kafka):
    """A broker refuses timestamps more than an hour ahead of its clock (message.timestamp.after.max.ms); once, the
    dataset stamped record i at now + i ms, and 10M records "were produced" while 3.9M landed."""
    topic = f"bench_dataset_{uuid.uuid4().hex[:8]}"
    assert create_topic(kafka, topic, 2)
    now_ms = int(time.time() * 1000)
    with pytest.raises(RuntimeError, match="refused 4 record"):
        produce_range(kafka, topic, 2, now_ms + 2 * 3_600_000, 0, 4)

    records = 10_000_000  # base + i stays behind the clock for every record of a 10M-record dataset
    produce_range(kafka, topic, 2, first_timestamp_ms(now_ms, records), records - 4, 4)
    assert partition_bounds(kafka, topic)[1] == {0: 2, 1: 2}
