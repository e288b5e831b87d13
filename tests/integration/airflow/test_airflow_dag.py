"""Pipelines through Airflow: DAG import, and the ingest DAG end to end with `airflow dags test` (its jobs on the
Spark Connect server, but for the two that go through the operator's spark-submit path)."""

import json
import os
import re
import subprocess
from collections import Counter

from sqlalchemy import create_engine, text

from helpers.airflow_access import run_dag
from helpers.pipeline_env import reached_pause
from microingest.settings import repo_root

REPO = repo_root()


def airflow_db():
    return create_engine(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])


def task_states(dag_id: str) -> list[dict]:
    """Task states per run, oldest run first, read from Airflow's metadata database."""
    engine = airflow_db()
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT dr.run_id, ti.task_id, ti.state FROM task_instance ti JOIN dag_run dr "
                "ON dr.dag_id = ti.dag_id AND dr.run_id = ti.run_id WHERE ti.dag_id = :d "
                "ORDER BY dr.id"
            ),
            {"d": dag_id},
        ).all()
    engine.dispose()
    runs: dict[str, dict] = {}
    for run_id, task_id, state in rows:
        runs.setdefault(run_id, {})[task_id] = state
    return list(runs.values())


def test_ingest_dag_end_to_end(submit_env):
    """Through the operator's spark-submit path: its command, its output, and no credential on either."""
    env = submit_env
    first = env.produce(2500)
    result = run_dag(env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert env.target_rows() == sorted(first)
    assert task_states(env.pipeline.dag_id)[-1] == {"ingest": "success", "announce": "success"}
    [(_, _, _, written, dag_id, run_id)] = env.batches()
    assert (written, dag_id) == (2500, env.pipeline.dag_id) and run_id.startswith("manual__")
    assert_no_credentials_leaked(env, result.stdout + result.stderr)

    result = run_dag(env)  # nothing new: ingest plans and skips itself, Spark never starts, nothing is committed
    assert result.returncode == 0, result.stdout[-4000:]
    assert task_states(env.pipeline.dag_id)[-1] == {"ingest": "skipped", "announce": "skipped"}
    assert len(env.batches()) == 1 and env.target_rows() == sorted(first)
    latest = {}
    for p, o, _ in first:
        latest[p] = max(latest.get(p, 0), o + 1)
    assert env.ledger() == latest


def assert_no_credentials_leaked(env, output: str) -> None:
    """The Postgres password reached the Spark job, yet is in no task log, rendered template or XCom.

    `airflow dags test` prints the task logs (spark-submit's command and output included) to its output."""
    password = env.pg["password"]
    engine = airflow_db()
    with engine.connect() as conn:
        rendered = (
            conn.execute(
                text("SELECT rendered_fields::text FROM rendered_task_instance_fields WHERE dag_id = :d"),
                {"d": env.pipeline.dag_id},
            )
            .scalars()
            .all()
        )
        xcoms = (
            conn.execute(text("SELECT value::text FROM xcom WHERE dag_id = :d"), {"d": env.pipeline.dag_id})
            .scalars()
            .all()
        )
    engine.dispose()
    assert rendered and xcoms and "Spark-Submit cmd" in output
    for where, texts in (("task logs", [output]), ("rendered templates", rendered), ("XCom", xcoms)):
        assert not any(password in t for t in texts), f"the Postgres password leaked into {where}"


def test_unreachable_kafka_fails_the_run_clearly_and_commits_nothing(env, monkeypatch):
    env.redeclare(retries=0)  # `airflow dags test` would sit out every retry delay
    env.produce(50)
    monkeypatch.setenv(
        "AIRFLOW_CONN_MICROINGEST_KAFKA", '{"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:9"}}'
    )
    result = run_dag(env)
    assert result.returncode != 0
    assert "Kafka at 127.0.0.1:9 is unreachable" in result.stdout + result.stderr
    assert task_states(env.pipeline.dag_id)[-1]["ingest"] == "failed"
    assert env.batches() == [] and env.target_rows() == []


def test_dags_import_cleanly_with_task_sdk_imports_only(monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    from microingest.declare.files import load_pipelines

    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(REPO / "pipelines"))
    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert bag.import_errors == {}
    expected = {p.dag_id for p in load_pipelines()}
    assert expected and expected <= set(bag.dags)
    for dag_id in expected:
        dag = bag.dags[dag_id]
        assert {t.task_id for t in dag.tasks} == {"ingest", "announce"}
        announce = dag.get_task("announce")
        assert announce.is_teardown and dag.get_task("ingest").downstream_task_ids == {"announce"}
        assert [a.uri for a in announce.outlets] == [a.uri for a in announce.inlets] and len(announce.outlets) == 1
        assert {
            "max_records",
            "dry_run",
            "backfill_ranges",
            "backfill_from_time",
            "backfill_until_time",
            "overlap",
        } <= set(dag.params)
        assert dag.max_active_runs == 1
    summary = bag.dags["demo_events_summary"]  # the demo's downstream, on the demo target's Asset
    assert [a.uri for a in summary.timetable.asset_condition.objects] == [
        bag.dags["microingest_demo_events"].get_task("announce").outlets[0].uri
    ]

    airflow_imports = re.compile(r"^\s*(?:from|import)\s+(airflow[\w.]*)", re.M)
    for path in [
        *REPO.glob("dags/*.py"),
        *REPO.glob("src/microingest/airflow/*.py"),
        *REPO.glob("plugins/*.py"),
        *REPO.glob("src/microingest/lag/*.py"),
    ]:
        for module in airflow_imports.findall(path.read_text()):
            # BaseTrigger has no Task SDK home yet (triggers run in the triggerer, core Airflow); the plugin and the
            # lag page run in the api-server and use its plugin and authentication interfaces (the request's user,
            # and the auth manager that says which DAGs that user may read).
            assert module.startswith(
                (
                    "airflow.sdk",
                    "airflow.providers",
                    "airflow.triggers.base",
                    "airflow.plugins_manager",
                    "airflow.api_fastapi.core_api.security",
                    "airflow.api_fastapi.app",
                    "airflow.api_fastapi.auth.managers",
                )
            ), f"{path}: imports {module}"
    for path in REPO.glob("src/microingest/observe/*.py"):  # the pure side of announcements, notes and lineage
        assert not airflow_imports.findall(path.read_text()), path


def test_a_task_parses_its_own_dag_alone_and_the_sla_dag_every_pipeline(monkeypatch):
    """What a task's process parses (Airflow's parsing context names its DAG): that pipeline's DAG, built from its one
    declaration; the SLA DAG, which watches every pipeline, and a DAG id no declaration has, from all of them."""
    from airflow.dag_processing.dagbag import DagBag

    from microingest.airflow.dag_factory import SLA_DAG_ID
    from microingest.declare.files import load_pipelines

    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(REPO / "pipelines"))
    every = {p.dag_id for p in load_pipelines()}
    one = sorted(every)[0]
    parsed = {}
    for dag_id in (None, one, SLA_DAG_ID, "microingest_no_such_pipeline"):
        if dag_id is not None:
            monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", dag_id)
        bag = DagBag(dag_folder=str(REPO / "dags" / "microingest_pipelines.py"))
        assert bag.import_errors == {}
        parsed[dag_id] = set(bag.dags)
    assert parsed[one] == {one}
    assert every <= parsed[None] == parsed[SLA_DAG_ID] == parsed["microingest_no_such_pipeline"]


def test_a_malformed_declaration_is_an_import_error_naming_file_and_field_and_the_others_stay(tmp_path):
    (tmp_path / "broken.yaml").write_text(
        "name: broken\ntopic: t\ntarget_table: t\nschema: {a: string}\nmax_records_per_batch: -5\n"
    )
    (tmp_path / "fine.yaml").write_text("name: fine\ntopic: t\ntarget_table: t\nschema: {a: string}\n")
    result = subprocess.run(
        [
            "python",
            "-c",
            "import json; from airflow.dag_processing.dagbag import DagBag; "
            f"bag = DagBag(dag_folder='{REPO / 'dags'}'); "
            "print(json.dumps([sorted(bag.dags), bag.import_errors]))",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "MICROINGEST_PIPELINES_DIR": str(tmp_path)},
        timeout=120,
    )
    dags, errors = json.loads(result.stdout.splitlines()[-1])
    assert dags == ["microingest_fine"], result.stderr[-2000:]
    [(path, error)] = errors.items()
    assert path.endswith("microingest_declaration_errors.py")
    assert "broken.yaml: field 'max_records_per_batch': must be a positive integer, got -5" in error


def test_three_runs_started_at_once_commit_each_range_once_and_the_others_are_fenced(env, tmp_path):
    """Three runs plan the same ranges and each waits with its batch decoded, just before its commit; released
    together, exactly one commits and the other two are fenced at their own commits, writing nothing."""
    env.redeclare(max_active_runs=3, retries=0)
    produced = env.produce(1200)
    dag_env = {**os.environ, "MICROINGEST_PIPELINES_DIR": str(env.pipelines_dir)}
    # Register the DAG first: three `dags test` processes would otherwise race to insert the same DAG row.
    subprocess.run(["airflow", "dags", "reserialize"], env=dag_env, check=True, capture_output=True, timeout=300)
    markers = [tmp_path / f"run-{i}-decoded" for i in range(3)]
    procs = [
        subprocess.Popen(
            ["airflow", "dags", "test", env.pipeline.dag_id],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**dag_env, "MICROINGEST_FAULT": f"after_decode:pause:{marker}"},
        )
        for marker in markers
    ]
    try:
        for proc, marker in zip(procs, markers):
            if not reached_pause(proc, marker, timeout=600):
                said = proc.communicate(timeout=60)[0][-6000:] if proc.poll() is not None else ""
                raise AssertionError(f"a run did not reach its commit: exit {proc.poll()}\n{said}")
    finally:
        for marker in markers:
            marker.unlink(missing_ok=True)
    outputs = [p.communicate(timeout=900)[0] for p in procs]

    assert env.landed_once() == sorted(produced), "every record exactly once"
    runs = task_states(env.pipeline.dag_id)[-3:]
    assert sorted(r.get("ingest") for r in runs) == ["failed", "failed", "success"], runs
    [(ranges,)] = env.query("SELECT ranges FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,))
    covered = Counter((r["partition"], o) for r in ranges for o in range(r["from"], r["until"]))
    assert set(covered.values()) == {1} and sorted(covered) == sorted((p, o) for p, o, _ in produced)
    failed_output = [o for o, p in zip(outputs, procs) if p.returncode != 0]
    assert len(failed_output) == 2
    for output in failed_output:
        assert "FencedError: fenced" in output and "nothing from this batch was written" in output


def test_an_airflow_retry_goes_on_after_a_kill_between_batches(submit_env, tmp_path):
    """A spark-submit application killed outright: the operator fails the try and the retry goes on."""
    env = submit_env
    env.redeclare(retries=1, retry_delay_seconds=0, max_records_per_batch=300)
    produced = env.produce(500)
    once = tmp_path / "fault-fired"
    result = run_dag(env, MICROINGEST_FAULT="after_commit", MICROINGEST_FAULT_ONCE=str(once))
    assert once.exists()
    assert result.returncode == 0, result.stdout[-4000:]
    # Batch 1 committed, then the kill; try 2 commits batch 2 in a new job.
    assert env.target_rows() == sorted(produced)
    assert env.query(
        "SELECT run_batch, task_try FROM microingest.batches WHERE pipeline = %s ORDER BY run_batch",
        (env.pipeline.name,),
    ) == [(1, 1), (2, 2)]
    assert "committed 1 batch(es) in earlier tries (300 records)" in result.stdout
    assert "the plan of an earlier try of this run (clearing 0)" in result.stdout  # the same plan, not a new one


def test_a_retry_after_the_whole_plan_committed_succeeds_with_that_outcome_without_spark(env, tmp_path):
    """The job dies right after its last commit (as if spark.stop() failed or the acknowledgement was lost)."""
    env.redeclare(retries=1, retry_delay_seconds=0)
    produced = env.produce(400)
    once = tmp_path / "fault-fired"
    result = run_dag(env, MICROINGEST_FAULT="after_commit", MICROINGEST_FAULT_ONCE=str(once))
    assert once.exists()
    assert result.returncode == 0, result.stdout[-4000:]
    assert "committed its whole plan (1 batch(es), 400 records)" in result.stdout
    assert env.target_rows() == sorted(produced)
    assert env.query(
        "SELECT run_batch, task_try FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)
    ) == [(1, 1)]
    assert task_states(env.pipeline.dag_id)[-1] == {"ingest": "success", "announce": "success"}
