"""The local platform's services under supervisord, on a real process tree shaped like a scheduler's: children that
leave its process group and ignore SIGTERM, as LocalExecutor workers do, one of which also drops its environment, as
a process renaming itself may. A service killed with SIGKILL is started again and its orphans do not survive it; a
stopped one leaves no process behind; a killed supervisord, started again, runs each service once."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from local_platform.faults import cluster
from local_platform.process_tree import cgroup_members, kill_all, living, service_cgroup, tag_of, tagged

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

SERVICE = """
import os, signal, sys, time
for i in range(2):
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if i:
            os.execve(sys.executable, [sys.executable, "-c", "import time, signal; signal.signal(signal.SIGTERM, "
                                       "signal.SIG_IGN); time.sleep(3600)"], {})
        while True:
            time.sleep(1)
print("up", flush=True)
while True:
    time.sleep(1)
"""

# What `make up` and `make down` call, in a platform of the test's own state folder.
PLATFORM = """
import json, sys
from pathlib import Path
from local_platform import processes
command, arg = sys.argv[1], sys.argv[2]
if command == "spawn":
    for name, spec in json.loads(arg).items():  # back to back, as `up` starts Airflow's services
        processes.spawn(name, spec["argv"], Path(spec["log"]), {"PATH": "/usr/bin:/bin"})
elif command == "stop":
    processes.stop(arg)
elif command == "down":
    processes.sweep()
print(json.dumps(processes.leftovers()))
"""


def _until(check, what: str, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _alive(pid: int) -> bool:
    return bool(living([pid]))


def _tree(pid: int) -> list[int]:
    try:
        return sorted([pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))])
    except psutil.NoSuchProcess:
        return []


def _restarted(pid_path: Path, old: int):
    """The service's new pid once service_exec.py wrote it, which it does after sweeping what the old one left."""
    return lambda: (lambda p: p if p and p != old and _alive(p) else None)(_pid(pid_path))


@pytest.mark.platform_free  # toy services under a supervisor of their own, in a state folder of their own
@pytest.mark.parametrize("in_cgroup", [False, True], ids=["tag-and-orphans", "cgroup"])
def test_a_killed_service_comes_back_without_its_orphans_and_a_stopped_one_leaves_nothing(tmp_path, in_cgroup):
    state, script = tmp_path / "state", tmp_path / "service.py"
    script.write_text(SERVICE)
    env = {**os.environ, "MICROINGEST_STATE": str(state), "MICROINGEST_CGROUPS": "on" if in_cgroup else "off"}
    env["PYTHONPATH"] = str(SCRIPTS)
    run = state / "run"
    group = service_cgroup(run, "toy") if in_cgroup else None
    if in_cgroup and group is None:
        pytest.skip("no cgroup v2 hierarchy this user may write to")

    def platform(command: str, arg: str) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", PLATFORM, command, arg], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    spec = json.dumps({"toy": {"argv": [sys.executable, str(script)], "log": str(state / "toy.log")}})
    # A neighbour started right after it, whose processes no sweep of toy's may touch.
    neighbour = {"argv": [sys.executable, "-c", "import time; time.sleep(3600)"], "log": str(state / "other.log")}
    restarted: list[int] = []
    try:
        platform("spawn", json.dumps({**json.loads(spec), "other": neighbour}))
        first = _until(lambda: _pid(run / "toy.pid"), "the service")
        other = _until(lambda: _pid(run / "other.pid"), "the neighbour")
        tree = _until(lambda: (lambda t: t if len(t) == 3 else None)(_tree(first)), "the service and its two children")
        assert len(tagged(tag_of(run, "toy"))) == 2, "the child that dropped its environment carries no tag"
        if group:
            assert sorted(cgroup_members(group)) == tree

        os.kill(first, signal.SIGKILL)
        second = _until(_restarted(run / "toy.pid", first), "the restarted service")
        assert not any(_alive(pid) for pid in tree), "the killed service's children outlived it"
        restarted = _until(lambda: (lambda t: t if len(t) == 3 else None)(_tree(second)), "the new children")
        assert _alive(other) and _pid(run / "other.pid") == other, "a sweep of toy's ended its neighbour"
        platform("stop", "other")
        assert not _alive(other)

        supervisord = _pid(run / "supervisord.pid")
        os.kill(supervisord, signal.SIGKILL)  # what `make up` meets after an OOM kill of supervisord
        _until(lambda: not _alive(supervisord), "supervisord gone")
        assert all(_alive(pid) for pid in restarted), "the service outlives its supervisord"
        # Handed to init, not to the new supervisord: without a cgroup, the child without a tag is not found again.
        findable = restarted if group else sorted(tagged(tag_of(run, "toy")))
        assert len(findable) == (3 if group else 2)
        platform("spawn", spec)
        third = _until(_restarted(run / "toy.pid", second), "the service under the new supervisord")
        assert not any(_alive(pid) for pid in findable), "the service ran twice"
        running = _until(lambda: (lambda t: t if len(t) == 3 else None)(_tree(third)), "its children")

        platform("stop", "toy")
        left = platform("down", "")
        assert left == {} and not any(_alive(pid) for pid in running)
        assert not (run / "toy.pid").exists() and not (run / "toy.json").exists()
        assert not _alive(_pid(run / "supervisord.pid") or 0)
        assert group is None or not group.exists()
    finally:
        kill_all(sorted({*tagged(tag_of(run, ""), prefix=True), *cgroup_members(group), *restarted}), signal.SIGKILL)
    log = (state / "toy.log").read_text()
    assert "[toy] killing 2 process(es) left behind by its previous run" in log, log
    assert f"[toy] killing {len(findable)} process(es) left behind by its previous run" in log, log
    assert "exited: toy (terminated by SIGKILL; not expected)" in (state / "supervisord.log").read_text()


@pytest.mark.disruptive
def test_the_platform_scheduler_killed_takes_its_executor_workers_with_it_and_comes_back():
    """The case that needed the supervisor: a scheduler killed with kill -9 used to leave its LocalExecutor workers
    (which ignore SIGTERM) and its log server running, and `make down` left them too."""
    run = Path(os.environ["MICROINGEST_STATE"]) / "run"
    scheduler = _pid(run / "airflow-scheduler.pid")
    assert scheduler, "`make test` runs the platform's scheduler"
    children = [pid for pid in _tree(scheduler) if pid != scheduler]
    assert len(children) >= 2, f"the scheduler's executor workers and log server: {children}"

    os.kill(scheduler, signal.SIGKILL)
    _until(_restarted(run / "airflow-scheduler.pid", scheduler), "the scheduler started again", timeout=120)
    assert not any(_alive(pid) for pid in children), "the killed scheduler's processes outlived it"
    _until(cluster.scheduler_healthy, "the new scheduler's health check", timeout=180)


@pytest.mark.disruptive
def test_make_up_from_a_shell_that_sourced_platform_env_starts_only_what_is_missing():
    """The scheduler stopped by an operator's `supervisorctl stop` (or left FATAL by too many quick exits); `make up`
    from a shell that sourced .state/platform.env (as the suite's is) takes the connections there for the platform's
    own, starts the scheduler again and leaves every running service alone."""
    run = Path(os.environ["MICROINGEST_STATE"]) / "run"
    assert os.environ.get("AIRFLOW_CONN_MICROINGEST_SCHEMA_REGISTRY"), "the suite's environment sourced platform.env"
    others = {
        name: _pid(run / f"{name}.pid")
        for name in ("airflow-api-server", "airflow-dag-processor", "airflow-triggerer", "kafka", "spark-connect")
    }
    assert all(others.values()), others
    # The local registry, which `make up` starts on demand, is not running either: the connection platform.env names
    # for it is no server of someone else's to refuse as unreachable.
    subprocess.run(
        [sys.executable, str(SCRIPTS / "services.py"), "stop", "schema-registry"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    scheduler = _pid(run / "airflow-scheduler.pid")
    subprocess.run(
        [
            str(Path(sys.executable).parent / "supervisorctl"),
            "-c",
            str(run / "supervisord.conf"),
            "stop",
            "airflow-scheduler",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    _until(lambda: not _alive(scheduler), "the scheduler gone")

    up = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "services.py"),
            "up",
            "--pipelines-dir",
            os.environ["MICROINGEST_PIPELINES_DIR"],
            "--spark-connect",
            "--schema-registry",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ,
    )
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-2000:]
    assert "is unreachable" not in up.stdout + up.stderr and "restarting it" not in up.stdout
    restarted = _pid(run / "airflow-scheduler.pid")
    assert restarted and restarted != scheduler and _alive(restarted)
    assert _alive(_pid(run / "schema-registry.pid") or 0), "the local registry started again"
    assert {name: _pid(run / f"{name}.pid") for name in others} == others, "running services were left alone"
    _until(cluster.scheduler_healthy, "the new scheduler's health check", timeout=180)
