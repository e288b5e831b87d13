"""Runs on the long-lived Spark driver: pipelines whose Spark connection is the local Spark Connect server (started by
`make test`, or by the fixture here) run their job as a Python client of it, with no Spark application of their own.

Exactly once on it: across runs, when the client is killed with -9 or stopped with SIGTERM, and when the server itself
is killed in the middle of a batch's decoding.
"""

from __future__ import annotations

import os
import signal

import pytest

from helpers.pipeline_env import reached_pause
from local_platform.faults.cluster import platform
from microingest import settings
from microingest.plan.live import plan_live_run, plan_next_batch
from microingest.spark import connect as spark_connect


@pytest.fixture(scope="module")
def server():
    platform("start", "spark-connect")  # returns at once when it already answers


@pytest.fixture
def connect_env(env, server):
    assert env.pipeline.spark_conn_id == spark_connect.PLATFORM_CONN_ID
    return env


def app_ids(env) -> set[str]:
    return {
        r[0]
        for r in env.query("SELECT spark_app_id FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,))
    }


def test_runs_on_the_server_land_each_record_once_and_start_no_spark_application(connect_env):
    env = connect_env
    env.redeclare(max_records_per_batch=1000)
    produced = env.produce(2500)
    env.ingest_all()
    env.assert_exactly_once(produced)
    assert [b[2] for b in env.batches()] == [1000, 1000, 500]

    produced += env.produce(700, start=2500)
    env.ingest_all()
    env.assert_exactly_once(produced)
    [app] = app_ids(env)  # every batch of both runs ran in the server's one Spark application
    assert app.startswith("local-")


def test_batches_through_a_statement_leave_no_copy_of_the_sessions_files_on_the_server(connect_env):
    """Each batch through a statement persists frames. Cached under a clone of the session, each would copy every
    file the session holds (the job's Python bundle: 86 MB) into a folder of the server's kept while it runs."""
    env = connect_env
    env.redeclare(transform_sql="SELECT * FROM batch", max_records_per_batch=100)
    produced = env.produce(10)
    env.ingest_all()  # the session holds this build's bundle before the folders are counted
    before = session_folders()
    produced += env.produce(300, start=10)
    env.ingest_all()
    env.assert_exactly_once(produced)
    assert len(env.batches()) == 4
    assert session_folders() == before


def session_folders() -> set[str]:
    """The server's folders of session files (its local executors' SparkFiles), one per session or clone."""
    return {p.name for p in (settings.state_dir() / "spark-scratch").glob("spark-*/userFiles-*/*") if p.is_dir()}


@pytest.mark.quick
def test_a_client_killed_after_decoding_commits_nothing_and_the_rerun_lands_each_record_once(connect_env):
    env = connect_env
    produced = env.produce(1500)
    plan = plan_next_batch(env.pipeline)

    killed = env.spark_job(list(plan.ranges), fault="after_decode")

    assert killed.returncode == -signal.SIGKILL
    assert "decoded: 1500 rows" in killed.stdout + killed.stderr, "the kill must come after the batch was decoded"
    assert env.target_rows() == [] and env.ledger() == {} and env.batches() == []
    assert plan_next_batch(env.pipeline).ranges == plan.ranges
    env.ingest_all()
    env.assert_exactly_once(produced)
    assert len(env.batches()) == 1


def test_a_client_stopped_with_sigterm_discards_its_batch_and_the_rerun_lands_each_record_once(
    connect_env, tmp_path, finish
):
    """SIGTERM is what the operator's on_kill sends: the job unwinds, and nothing of its batch was written."""
    env = connect_env
    produced = env.produce(1200)
    marker = tmp_path / "paused"
    proc = env.spark_job(list(plan_next_batch(env.pipeline).ranges), fault=f"after_decode:pause:{marker}", wait=False)
    assert reached_pause(proc, marker), finish(proc).stdout[-3000:]

    proc.send_signal(signal.SIGTERM)
    stopped = finish(proc)

    assert stopped.returncode == 128 + signal.SIGTERM, stopped.stdout[-3000:]
    assert "decoded: 1200 rows" in stopped.stdout and env.target_rows() == [] and env.ledger() == {}
    env.ingest_all()
    env.assert_exactly_once(produced)


@pytest.mark.disruptive
def test_the_server_killed_while_decoding_commits_nothing_and_after_a_restart_the_rerun_lands_each_record_once(
    connect_env, tmp_path, finish
):
    env = connect_env
    produced = env.produce(30_000)
    marker = tmp_path / "decoding"
    # The server's tasks pause once they decoded a record (the fault travels inside the JVM decoder's spec), so the
    # kill lands while the batch is on the server and nothing of it has reached the client.
    proc = env.spark_job(plan_live_run(env.pipeline), fault=f"executor_after_decode:pause:{marker}", wait=False)
    paused = reached_pause(proc, marker)
    if paused:
        os.killpg(server_pid(), signal.SIGKILL)
    failed = finish(proc)
    assert paused, "no worker paused after decoding: " + failed.stdout[-3000:]

    assert failed.returncode != 0
    # Its own error is what it reports: the interruption of its operations on a server that is gone is tried once.
    assert "could not interrupt the server's operations" in failed.stdout, failed.stdout[-3000:]
    assert "Traceback" in failed.stdout and "interruptTag" not in failed.stdout, failed.stdout[-3000:]
    assert "decoded:" not in failed.stdout and env.target_rows() == [] and env.ledger() == {}
    platform("start", "spark-connect")
    env.ingest_all()
    env.assert_exactly_once(produced)


def server_pid() -> int:
    return int((settings.state_dir() / "run" / "spark-connect.pid").read_text())


def test_a_dag_run_on_the_server_commits_its_plan(api, served, server):
    env = served["connect"]
    produced = env.produce(800)
    run = api.wait_for_run(env.pipeline.dag_id, api.trigger(env.pipeline.dag_id, {}), timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"}), run.describe()
    env.assert_exactly_once(produced)
    outcome = api.xcom(run, "ingest")
    assert (outcome["status"], outcome["records_read"]) == ("committed", 800)
    # The platform's job-forks server runs the suite's code: the job was forked, its imports done, not spawned.
    said = [str(e.get("event")) for e in api.log_events(run, "ingest")]
    assert any("forked by the job-forks server" in line for line in said), said[:20]
