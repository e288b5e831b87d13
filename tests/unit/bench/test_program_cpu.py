"""The bench's CPU by program, on real processes: each program's tree is counted once with its idle rate taken off,
what the machine spent beyond them is "other", and the report gives each in µs per record."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from microingest.bench import report
from microingest.bench.memory import PeakMemory
from microingest.bench.program_cpu import BENCH, OTHER, ProgramCpu, with_other, without_sampler

BURN = "import time\nwhile time.process_time() < 0.4: pass"  # 0.4 CPU seconds of its own, however slow the machine


def test_a_programs_tree_is_counted_with_its_idle_rate_taken_off():
    # Burns 0.4 s once told to (its start-up before the block, not in it), then waits to be closed.
    told = "import sys, time\nsys.stdin.readline()\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"
    burner = subprocess.Popen([sys.executable, "-c", told + "\nsys.stdin.read()"], stdin=subprocess.PIPE, text=True)
    try:
        roots = {"burner": psutil.Process(burner.pid), "bench": psutil.Process()}
        before = sum(roots["burner"].cpu_times()[:2])
        with ProgramCpu(roots) as cpu:
            burner.stdin.write("burn\n")
            burner.stdin.flush()
            subprocess.run([sys.executable, "-c", BURN], check=True)  # a child of the bench, ended inside the block
            while sum(roots["burner"].cpu_times()[:2]) - before < 0.38:
                time.sleep(0.01)
        assert 0.35 <= cpu.seconds["bench"] < 0.7  # the ended child's time, in its children times; not the burner's
        assert 0.35 <= cpu.seconds["burner"] <= 0.5
        with ProgramCpu(roots, idle={"bench": 1000.0}) as quiet:  # more than any machine spends
            subprocess.run([sys.executable, "-c", BURN], check=True)
        assert quiet.seconds["bench"] < -100  # quieter than its idle rate says: below 0, as the machine's figure
    finally:
        burner.stdin.close()
        burner.wait(timeout=60)


def test_other_is_what_the_machine_spent_beyond_the_programs():
    assert with_other({"a": 1.0, "b": 0.5}, 2.0) == {"a": 1.0, "b": 0.5, OTHER: 0.5}
    assert with_other({"a": 1.0}, 0.75) == {"a": 1.0, OTHER: -0.25}  # counted apart, shown as it came
    assert with_other({"a": 1.0}, None) == {"a": 1.0}


def test_the_memory_samplers_cpu_is_taken_off_the_machine_and_the_bench_alike():
    machine, spent = without_sampler(3.0, {BENCH: 1.5, "spark-connect": 1.0}, 0.5)
    assert machine == 2.5
    assert spent == {BENCH: 1.0, "spark-connect": 1.0, OTHER: 0.5}  # OTHER as it was before the sampler came off


def test_the_report_gives_each_programs_cpu_per_record():
    r = {
        "measurements": [
            {"label": "through Airflow", "records": 1000, "cpu_by_program": {"spark-connect": 0.01, OTHER: 0.002}},
            {"label": "the loop", "records": 2000, "cpu_by_program": {"bench": 0.03, "postgres": 0.01, OTHER: 0.0}},
            {"label": "a limit", "records": 10},
        ]
    }
    lines = report.program_table(r)
    assert "| contender | bench | postgres | spark-connect | other |" in lines
    assert "| through Airflow | – | – | 10.0 | 2.0 |" in lines
    assert "| the loop | 15.0 | 5.0 | – | 0.0 |" in lines
    assert not any("a limit" in line for line in lines)
    assert report.program_table({"measurements": [{"label": "x", "records": 5}]}) == []


def test_the_memory_samplers_own_cpu_is_measured_for_the_bench_to_take_off():
    with PeakMemory(("no-such-marker",), interval=0.01) as memory:
        time.sleep(0.3)  # several looks at every process's memory, each some milliseconds of CPU
    assert 0.0 < memory.cpu_seconds < 0.3 + 0.05
