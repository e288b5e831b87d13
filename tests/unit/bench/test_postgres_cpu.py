"""The CPU accounting the bench reads for Postgres, on a real process tree: a child's CPU is counted whether it
still runs or has ended, and nothing outside the tree is."""

import subprocess
import sys

import psutil

from microingest.bench.postgres_cpu import PostgresCpu, tree_cpu_seconds

# A child that burns 0.4 s of its own CPU time (not wall time: however fast the machine), then waits or ends.
BURN = "import sys, time\nwhile time.process_time() < 0.4: pass\nprint('burnt', flush=True)\n{after}"
PARENT = """
import subprocess, sys
burn = {burn!r}
ended = subprocess.run([sys.executable, "-c", burn.format(after="")], capture_output=True)  # reaped by run()
alive = subprocess.Popen([sys.executable, "-c", burn.format(after="sys.stdin.read()")], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
alive.stdout.readline()
print("ready", flush=True)
sys.stdin.read()
alive.stdin.close(); alive.wait()
"""


def test_an_ended_child_and_a_running_one_are_both_counted():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT.format(burn=BURN)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        root = psutil.Process(parent.pid)
        with PostgresCpu(root) as cpu:
            assert parent.stdout.readline() == "ready\n"
        # 0.4 s in the ended child (in the parent's children times) and 0.4 s in the running one; the kernel counts
        # in clock ticks, so a little less may show, but never as little as one child's
        assert cpu.seconds > 0.6
        assert tree_cpu_seconds(root) >= cpu.seconds
    finally:
        parent.stdin.close()
        parent.wait(timeout=60)


def test_without_a_local_server_there_is_no_figure():
    with PostgresCpu(None) as cpu:
        pass
    assert cpu.seconds is None
