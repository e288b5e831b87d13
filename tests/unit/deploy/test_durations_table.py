"""The durations table of docs/testing.md, read from pytest's JUnit report (scripts/test_durations.py)."""

from __future__ import annotations

import test_durations

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.integration.spark.test_spark_job" name="test_a@disruptive" time="12.5"/>
<testcase classname="tests.integration.spark.test_spark_job" name="test_b" time="7.5"/>
<testcase classname="tests.unit.plan.test_windows" name="test_c[@hourly]" time="0.25"/>
<testcase classname="tests.unit.plan.test_windows" name="test_skipped" time="0.0"><skipped message="x"/></testcase>
</testsuite></testsuites>
"""


def test_modules_sum_their_tests_and_skipped_ones_are_left_out(tmp_path):
    path = tmp_path / "results.xml"
    path.write_text(REPORT)
    modules = test_durations.read_junit([path])
    job = modules["tests/integration/spark/test_spark_job.py"]
    assert (job.tests, job.seconds, max(job.slowest)) == (2, 20.0, (12.5, "test_a"))
    assert modules["tests/unit/plan/test_windows.py"].slowest == [(0.25, "test_c[@hourly]")]

    table = test_durations.markdown(modules, top=5)
    assert table.startswith("3 tests, 0.3 min of test time in all")
    assert "| integration/spark | 2 | 0.3 | 99% |" in table
    row = next(line for line in table.splitlines() if line.startswith("| `integration/spark/test_spark_job.py`"))
    assert "| 2 | 20 | `test_a` (12) |" in row


def test_what_a_module_pays_for_is_read_from_its_source(tmp_path):
    module = tmp_path / "test_x.py"
    module.write_text('"""Races. More."""\n\ndef test_a(submit_env, api):\n    api.trigger("d")\n')
    assert test_durations.pays(module) == "spark-submit per job, scheduler DAG runs"
    assert test_durations.proves(module) == "Races."
