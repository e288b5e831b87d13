"""The machine's CPU on a contender: a process it keeps busy counts whoever started it, and the idle platform's rate
is taken off."""

from __future__ import annotations

import subprocess
import sys

from microingest.bench.machine_cpu import MachineCpu

BURN = "import time\nwhile time.process_time() < 0.5: pass"  # half a CPU second of its own, however slow the machine


def test_a_process_that_burned_cpu_inside_the_block_is_counted():
    with MachineCpu(idle=0.0) as cpu:
        subprocess.run([sys.executable, "-c", BURN], check=True)
    assert cpu.seconds >= 0.45  # the kernel's accounting ticks: a few ms either way


def test_the_idle_rate_is_taken_off_and_never_below_nothing():
    with MachineCpu(idle=1000.0) as cpu:  # more than any machine spends: all of it is the platform's background
        subprocess.run([sys.executable, "-c", BURN], check=True)
    assert cpu.seconds == 0.0
