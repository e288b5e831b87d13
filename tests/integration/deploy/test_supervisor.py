"""The local platform's supervisor on a real process tree shaped like a scheduler's: children that leave its process
group and ignore SIGTERM, as LocalExecutor workers do. A service killed with SIGKILL is started again and its orphans
do not survive it; a stopped service leaves no process behind."""

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from local_platform.process_tree import (
    cgroup_members,
    descendants,
    living,
    platform_cgroup,
    tag_of,
    tagged,
)

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"

# The second child also drops its environment, as a process renaming itself may overwrite it.
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


def _scheduler_healthy() -> bool:
    from local_platform import config

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{config.SCHEDULER_HEALTH_PORT}/health", timeout=5):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    return bool(living([pid]))


@pytest.mark.parametrize("in_cgroup", [False, True], ids=["process-tree", "cgroup"])
def test_a_killed_service_comes_back_without_its_orphans_and_a_stopped_one_leaves_nothing(tmp_path, in_cgroup):
    script, run_dir = tmp_path / "service.py", tmp_path / "run"
    script.write_text(SERVICE)
    group = platform_cgroup(run_dir) / "toy" if in_cgroup and platform_cgroup(run_dir) else None
    if in_cgroup and group is None:
        pytest.skip("no cgroup v2 hierarchy this user may write to")
    log = open(tmp_path / "supervisor.log", "wb")
    supervisor = subprocess.Popen(
        [
            sys.executable,
            str(SCRIPTS / "local_platform" / "supervisor.py"),
            "--name",
            "toy",
            "--run-dir",
            str(run_dir),
            "--grace",
            "3",
            *(["--cgroup", str(group)] if group else []),
            "--",
            sys.executable,
            str(script),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    tag = tag_of(run_dir, "toy")
    try:
        first = _until(lambda: _pid(run_dir / "toy.pid"), "the service")
        tree = _until(
            lambda: (lambda t: t if len(t) == 3 else None)(descendants(supervisor.pid)),
            "the service and its two children",
        )
        assert first in tree and _pid(run_dir / "toy.supervisor.pid") == supervisor.pid
        assert len(tagged(tag)) == 2, "the child that dropped its environment should carry no tag"
        if group:
            assert sorted(cgroup_members(group)) == sorted(tree)

        os.kill(first, signal.SIGKILL)
        second = _until(
            lambda: (lambda p: p if p and p != first and _alive(p) else None)(_pid(run_dir / "toy.pid")),
            "the restarted service",
        )
        orphans = [pid for pid in tree if pid != first]
        assert not any(_alive(pid) for pid in orphans), "the killed service's children outlived it"
        _until(lambda: len(descendants(supervisor.pid)) == 3, "the restarted service's children")
        restarted = descendants(supervisor.pid)

        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=60) == 0
        assert tagged(tag) == [] and not any(_alive(pid) for pid in restarted) and second in restarted
        assert not (run_dir / "toy.pid").exists() and not (run_dir / "toy.supervisor.pid").exists()
        assert group is None or not group.exists()
    finally:
        for pid in set(tagged(tag)) | set(descendants(supervisor.pid)):
            os.kill(pid, signal.SIGKILL)
        if supervisor.poll() is None:
            supervisor.kill()
        if group and group.exists():
            group.rmdir()
        if group and group.parent.exists():
            group.parent.rmdir()
        log.close()
    text = (tmp_path / "supervisor.log").read_text()
    assert "killed by SIGKILL" in text and "SIGKILL to 2 process(es)" in text, text


def test_the_platform_scheduler_killed_takes_its_executor_workers_with_it_and_comes_back():
    """The case that needed the supervisor: a scheduler killed with kill -9 used to leave its LocalExecutor workers
    (which ignore SIGTERM) and its log server running, and `make down` left them too."""
    run = Path(os.environ["MICROINGEST_STATE"]) / "run"
    scheduler, supervisor = _pid(run / "airflow-scheduler.pid"), _pid(run / "airflow-scheduler.supervisor.pid")
    assert scheduler and supervisor, "`make test` runs the platform's scheduler under its supervisor"
    children = [pid for pid in descendants(supervisor) if pid != scheduler]
    assert len(children) >= 2, f"the scheduler's executor workers and log server: {children}"

    os.kill(scheduler, signal.SIGKILL)
    _until(
        lambda: (lambda p: p and p != scheduler and _alive(p))(_pid(run / "airflow-scheduler.pid")),
        "the scheduler started again",
        timeout=120,
    )
    assert not any(_alive(pid) for pid in children), "the killed scheduler's processes outlived it"
    _until(_scheduler_healthy, "the new scheduler's health check", timeout=180)


def test_make_up_from_a_shell_that_sourced_platform_env_starts_only_what_is_missing():
    """The scheduler and its supervisor killed by name, as an OOM kill or a careless operator would; `make up` from a
    shell that sourced .state/platform.env (as the suite's is) takes the connections there for the platform's own,
    starts the scheduler again and leaves every running service alone."""
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
    scheduler, supervisor = _pid(run / "airflow-scheduler.pid"), _pid(run / "airflow-scheduler.supervisor.pid")
    os.kill(supervisor, signal.SIGKILL)
    os.kill(scheduler, signal.SIGKILL)
    _until(lambda: not _alive(scheduler) and not _alive(supervisor), "the scheduler and its supervisor gone")

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
    _until(_scheduler_healthy, "the new scheduler's health check", timeout=180)
