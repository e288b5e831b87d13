"""The job-forks server, as a real process, with a job script of the test's own: a forked job is what a spawned one
would be (arguments, environment, working directory, output, exit code, process group, command line), a stop and a
task killed outright both end it, and a server that runs other code, or none, leaves the task to spawn its job."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from microingest.airflow.job_process import JobProcess
from microingest.spark import job_forks

JOB = """
import json, os, signal, sys, time
facts = {"args": sys.argv[1:], "marker": os.environ.get("MARKER"), "server_only": os.environ.get("SERVER_ONLY"),
         "cwd": os.getcwd(), "path0": sys.path[0], "leader": os.getsid(0) == os.getpid() == os.getpgid(0),
         "stdin": os.path.realpath(f"/proc/self/fd/0"),
         "cmdline": open("/proc/self/cmdline", "rb").read().replace(b"\\0", b" ").decode().strip()}
def ended(*_):
    open(sys.argv[2], "w").write("stopped")
    sys.exit(7)
if sys.argv[1] == "sleep":
    signal.signal(signal.SIGTERM, ended)
print(json.dumps(facts), flush=True)
print("to stderr", file=sys.stderr, flush=True)
if sys.argv[1] == "sleep":
    time.sleep(120)
if sys.argv[1] == "raise":
    raise RuntimeError("the job broke")
if sys.argv[1] == "message":
    sys.exit("the job says why")
if sys.argv[1] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[1] == "left":  # a pool never shut down, and an exit hook: an interpreter's end stops one, runs the other
    import atexit, concurrent.futures
    concurrent.futures.ThreadPoolExecutor(2).submit(time.sleep, 0.2)
    atexit.register(lambda: open(sys.argv[2], "w").write("ran"))
    sys.exit(0)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture
def job_script(tmp_path):
    script = tmp_path / "scripts" / "job.py"
    script.parent.mkdir()
    script.write_text(JOB)
    return script


@pytest.fixture
def server(tmp_path, job_script, monkeypatch):
    """A server running `job_script`; the test's process is its task, with the same script."""
    with served(tmp_path, job_script, monkeypatch) as path:
        yield path


@contextlib.contextmanager
def served(tmp_path, job_script, monkeypatch):
    path = tmp_path / "run" / "forks.sock"
    monkeypatch.setenv("MICROINGEST_SPARK_JOB", str(job_script))
    monkeypatch.setenv("MICROINGEST_JOB_FORKS_SOCKET", str(path))
    job_forks.fingerprint.cache_clear()
    proc = subprocess.Popen(
        [sys.executable, "-m", "microingest.spark.job_fork_server", "--socket", str(path)],
        env={**os.environ, "SERVER_ONLY": "yes"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 60
    while not (path.exists() and job_forks.answers(path)):
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read() if proc.poll() else "no socket"
        time.sleep(0.1)
    try:
        yield path
    finally:
        proc.terminate()
        proc.wait(10)
        job_forks.fingerprint.cache_clear()
    assert not path.exists(), "the server left its socket behind"


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def _task_log() -> tuple[logging.Logger, Lines]:
    log = logging.getLogger(f"test-job-forks-{time.monotonic_ns()}")
    log.setLevel(logging.INFO)
    lines = Lines()
    log.addHandler(lines)
    return log, lines


def _job(script: Path, *args: str, env: dict[str, str] | None = None) -> tuple[JobProcess, Lines]:
    log, lines = _task_log()
    return JobProcess([sys.executable, str(script), *args], env or {"MARKER": "task"}, log, forkable=True), lines


def _facts(lines: Lines) -> dict:
    return json.loads(next(line for line in lines.lines if line.startswith("{")))


def test_a_forked_job_is_what_a_spawned_one_would_be(server, job_script, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job, lines = _job(job_script, "3", "second")
    assert job.run() == 3
    assert any("forked by the job-forks server" in line for line in lines.lines)
    facts = _facts(lines)
    assert facts == {
        "args": ["3", "second"],
        "marker": "task",  # the task's environment, and only it: nothing of the server's
        "server_only": None,
        "cwd": str(tmp_path),
        "path0": str(job_script.parent),
        "leader": True,
        "stdin": "/dev/null",
        "cmdline": f"{sys.executable} {job_script} 3 second",
    }
    assert "to stderr" in lines.lines

    spawned, spawned_lines = _job(job_script, "3", "second")
    spawned.forkable = False
    assert spawned.run() == 3
    assert {**_facts(spawned_lines), "cmdline": facts["cmdline"]} == facts


@pytest.mark.parametrize(
    "how, code, said",
    [
        ("raise", 1, "RuntimeError: the job broke"),
        ("message", 1, "the job says why"),
        ("killed", -signal.SIGKILL, None),
        ("left", 0, None),
    ],
)
def test_a_forked_job_ends_as_a_spawned_one_would(server, job_script, tmp_path, how, code, said):
    """Its exit code and last words; a thread pool it never shut down does not keep it (or the task) waiting, and
    its atexit hooks run."""
    marker = tmp_path / "hook"
    for forkable in (True, False):
        marker.unlink(missing_ok=True)
        job, lines = _job(job_script, how, str(marker))
        job.forkable = forkable
        assert job.run() == code, (forkable, lines.lines)
        assert (job._forked is not None) == forkable
        assert said is None or any(said in line for line in lines.lines), (forkable, lines.lines)
        assert marker.exists() == (how == "left"), forkable


def test_the_server_runs_only_its_own_script(server, job_script, tmp_path):
    read_end, write_end = os.pipe()
    try:
        answer = job_forks.start(server, [sys.executable, str(tmp_path / "other.py")], {}, str(tmp_path), write_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert answer == f"the job-forks server at {server} did not start the job: it runs only {job_script}"


def test_a_stop_ends_a_forked_job_as_it_ends_a_spawned_one(server, job_script, tmp_path):
    marker = tmp_path / "stopped"
    job, lines = _job(job_script, "sleep", str(marker))
    codes: list[int] = []
    runner = threading.Thread(target=lambda: codes.append(job.run()))
    runner.start()
    _wait_for(lambda: any(line.startswith("{") for line in lines.lines))
    job.stop(grace_seconds=10)
    runner.join(20)
    assert codes == [7] and marker.read_text() == "stopped"


def test_a_task_killed_outright_takes_its_forked_job_with_it(server, job_script, tmp_path):
    """The task's process is SIGKILLed: its end of the socket closes, and the server stops the job."""
    marker = tmp_path / "stopped"
    task = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout);"
            "from microingest.airflow.job_process import JobProcess;"
            f"JobProcess([sys.executable, {str(job_script)!r}, 'sleep', {str(marker)!r}], {{}},"
            " logging.getLogger('task'), forkable=True).run()",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert task.stdout is not None
    started = next(line for line in task.stdout if "forked by the job-forks server" in line)
    pid = int(started.split("(pid ")[1].split(",")[0])
    next(line for line in task.stdout if '"args"' in line)  # the job is up, its SIGTERM handler set
    task.kill()
    task.wait()
    _wait_for(marker.exists)
    _wait_for(lambda: not Path(f"/proc/{pid}").exists())


def test_a_server_running_other_code_refuses_and_the_task_spawns_its_job(server, tmp_path, monkeypatch):
    other = tmp_path / "other" / "job.py"
    other.parent.mkdir()
    other.write_text(JOB)
    monkeypatch.setenv("MICROINGEST_SPARK_JOB", str(other))
    job_forks.fingerprint.cache_clear()
    job, lines = _job(other, "0")
    assert job.run() == 0
    assert any("runs other code than the task" in line for line in lines.lines)
    assert _facts(lines)["path0"] == str(other.parent) and job._proc is not None


def test_without_a_server_the_task_spawns_its_job(job_script, tmp_path, monkeypatch):
    monkeypatch.setenv("MICROINGEST_JOB_FORKS_SOCKET", str(tmp_path / "none.sock"))
    job, lines = _job(job_script, "5")
    assert job.run() == 5
    assert any("no job-forks server answers" in line for line in lines.lines) and job._proc is not None

    monkeypatch.setenv("MICROINGEST_JOB_FORKS", "off")
    job, lines = _job(job_script, "4")
    assert job.run() == 4 and not any("job-forks" in line for line in lines.lines)


def _wait_for(check, timeout: float = 30) -> None:
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def test_signals_reach_the_job_not_the_server(server, job_script, tmp_path):
    """The job leads its own process group: a stop signals the job's group, and the server goes on serving."""
    marker = tmp_path / "stopped"
    job, lines = _job(job_script, "sleep", str(marker))
    runner = threading.Thread(target=job.run)
    runner.start()
    _wait_for(lambda: any(line.startswith("{") for line in lines.lines))
    assert job._forked is not None
    os.killpg(job._forked.pid, signal.SIGTERM)
    runner.join(20)
    again, _ = _job(job_script, "0")
    assert again.run() == 0 and again._forked is not None


def test_an_upgrade_beside_a_running_server_makes_the_next_job_spawn(tmp_path, monkeypatch):
    """A dependency the job imports, in a PYTHONPATH folder: rewritten in place (its files, as a same-version
    reinstall or a hand edit writes them), then installed anew under another version. A fork would run the server's
    copy in memory beside the new files on disk; the server refuses, and the task spawns its job."""
    site = tmp_path / "site"
    (site / "mi_probe_dep-1.0.dist-info").mkdir(parents=True)
    (site / "mi_probe_dep-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: mi-probe-dep\n")
    (site / "mi_probe_dep.py").write_text("VERSION = '1.0'\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.syspath_prepend(str(site))
    script = tmp_path / "scripts" / "job.py"
    script.parent.mkdir()
    script.write_text("import mi_probe_dep\n" + JOB)

    env = {"MARKER": "task", "PYTHONPATH": str(site)}
    with served(tmp_path, script, monkeypatch):
        job, _ = _job(script, "0", env=env)
        assert job.run() == 0 and job._proc is None, "forked while nothing changed"

        (site / "mi_probe_dep.py").write_text("VERSION = '1.0'  # rebuilt\n")
        job, lines = _job(script, "0", env=env)
        assert job.run() == 0 and job._proc is not None
        assert any("module file(s) it imported changed on disk" in line for line in lines.lines), lines.lines

        (site / "mi_probe_dep-1.0.dist-info").rename(site / "mi_probe_dep-1.1.dist-info")
        job_forks.fingerprint.cache_clear()
        job, lines = _job(script, "0", env=env)
        assert job.run() == 0 and job._proc is not None
        assert any("runs other code than the task" in line for line in lines.lines), lines.lines
