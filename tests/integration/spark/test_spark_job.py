"""The Spark job and the commit protocol against real Kafka, Postgres and Spark (no Airflow in the loop).

The jobs run on the platform's Spark Connect server, as most pipelines' do; the first test runs one as a Spark
application of its own (spark-submit), whose kills and faults are the chaos test's."""

import json

import pytest

from microingest.batches import OffsetRange
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_next_batch


@pytest.mark.quick
def test_job_ingests_exactly_the_planned_ranges(submit_env):
    env = submit_env
    produced = env.produce(3000)
    plan = plan_next_batch(env.pipeline)
    assert plan.total_records == 3000 and len(plan.ranges) == 3

    result = env.spark_job(list(plan.ranges))

    assert result.returncode == 0, result.stderr[-3000:]
    assert env.target_rows() == sorted(produced)
    assert env.ledger() == {r.partition: r.until_offset for r in plan.ranges}
    [(_, kind, read, written, _, _)] = env.batches()
    assert (kind, read, written) == ("ingest", 3000, 3000)


def test_job_reads_only_the_planned_subrange(env):
    produced = env.produce(600)
    by_partition = {}
    for p, o, i in produced:
        by_partition.setdefault(p, []).append((p, o, i))
    partition, rows = max(by_partition.items(), key=lambda kv: len(kv[1]))
    r = OffsetRange(env.topic, partition, 10, 60, None)

    result = env.spark_job([r])

    assert result.returncode == 0, result.stdout[-3000:]
    assert env.target_rows() == sorted(row for row in rows if 10 <= row[1] < 60)
    assert env.ledger() == {partition: 60}


def test_racing_runs_for_the_same_ranges_one_commits_the_other_is_fenced(env, finish, tmp_path):
    """Both racers decode the same planned ranges and wait just before their commits, then go on together: the race
    is forced, not left to how fast each JVM happened to start."""
    produced = env.produce(1500)
    ranges = list(plan_next_batch(env.pipeline).ranges)
    markers = [tmp_path / f"racer-{i}-decoded" for i in range(2)]

    racers = [env.paused_job(ranges, "after_decode", marker) for marker in markers]
    for marker in markers:
        marker.unlink()
    results = [finish(p) for p in racers]

    codes = sorted(r.returncode for r in results)
    assert codes == [0, REFUSED_EXIT], [r.stdout[-2000:] + r.stderr[-2000:] for r in results]
    loser = next(r for r in results if r.returncode == REFUSED_EXIT)
    assert "fenced" in loser.stdout and "another run committed them first" in loser.stdout
    assert env.landed_once() == sorted(produced)
    assert len(env.batches()) == 1


def test_stale_plan_after_a_commit_is_fenced_and_writes_nothing(env):
    env.produce(500)
    stale = list(plan_next_batch(env.pipeline).ranges)
    assert env.spark_job(stale).returncode == 0
    before = env.target_rows()

    again = env.spark_job(stale)

    assert again.returncode == REFUSED_EXIT and "microingest: FencedError: fenced" in again.stdout
    assert env.target_rows() == before and len(env.batches()) == 1


def test_unreachable_postgres_fails_clearly_and_commits_nothing(env, monkeypatch):
    env.produce(100)
    ranges = list(plan_next_batch(env.pipeline).ranges)
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_POSTGRES", "postgresql://microingest:wrong-but-secret@127.0.0.1:9/x")

    result = env.spark_job(ranges)

    assert result.returncode != 0
    assert "Postgres at 127.0.0.1:9/x is unreachable" in result.stdout
    assert "wrong-but-secret" not in result.stderr + result.stdout
    monkeypatch.undo()
    assert env.target_rows() == [] and env.ledger() == {}


def test_start_from_latest_records_the_position_then_reads_only_later_records(env):
    env.redeclare(start_from="latest")
    env.produce(100)
    first = plan_next_batch(env.pipeline)
    assert first.ranges == () and len(first.pins) == 3
    pinned = env.ledger()
    assert sum(pinned.values()) == 100 and [b[1] for b in env.batches()] == ["pin"]

    later = env.produce(40, start=100)
    plan = plan_next_batch(env.pipeline)
    assert plan.pins == () and plan.total_records == 40
    assert all(r.ledger_offset == pinned[r.partition] for r in plan.ranges)

    assert env.spark_job(list(plan.ranges)).returncode == 0
    assert env.target_rows() == sorted(later)


def test_a_declaration_broken_since_the_plan_is_refused_and_nothing_is_written(env, tmp_path):
    """The declaration changed between the run's planning and the job: the job refuses (no retry would read it better),
    says why in its outcome, and commits nothing."""
    env.produce(10)
    ranges = list(plan_next_batch(env.pipeline).ranges)
    (env.pipelines_dir / f"{env.pipeline.name}.yaml").write_text("name: [not, a, name]\n")
    outcome = tmp_path / "outcome.json"
    result = env.spark_job(ranges, env_extra={"MICROINGEST_OUTCOME_FILE": str(outcome)})
    assert result.returncode == REFUSED_EXIT, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads(outcome.read_text())
    assert (report["status"], report["error_class"], report["retryable"], report["batches"]) == (
        "failed",
        "DeclarationError",
        False,
        0,
    )
    assert env.target_rows() == [] and env.ledger() == {}
