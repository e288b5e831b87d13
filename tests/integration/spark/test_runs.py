"""Runs that drain a backlog: one Spark application commits a run's plan in capped batches, each its own
transaction; a killed or retried run goes on where it stopped, losing and duplicating nothing."""

import re
import time

from helpers.pipeline_env import reached_pause
from microingest.batches import RunInfo
from microingest.plan.live import plan_live_run
from microingest.systems.kafka_access import json_bytes

RUN = RunInfo(dag_id="microingest_test", run_id="manual__drain")


def history(env):
    return env.query(
        "SELECT run_batch, records_read, rows_written, spark_app_id, run_id FROM microingest.batches "
        "WHERE pipeline = %s AND kind = 'ingest' ORDER BY run_batch",
        (env.pipeline.name,),
    )


def test_one_run_drains_a_backlog_in_capped_batches_inside_one_spark_application(env):
    env.redeclare(max_records_per_batch=700)
    produced = env.produce(3000)
    plan = plan_live_run(env.pipeline)
    assert plan.total_records == 3000 and plan.batches_needed == 5

    result = env.spark_job(plan, run=RUN)

    assert result.returncode == 0, result.stdout[-3000:]
    env.assert_exactly_once(produced)
    batches = history(env)
    assert [b[0] for b in batches] == [1, 2, 3, 4, 5]
    assert [b[1] for b in batches] == [700, 700, 700, 700, 200]
    assert len({b[3] for b in batches}) == 1, "all batches in one Spark application"
    assert "batch 5 of 5 committed" in result.stdout and "rows/s" in result.stdout
    assert env.ledger() == {r.partition: r.until_offset for r in plan.ranges}


def test_the_run_cap_bounds_a_run_and_the_next_run_goes_on(env):
    env.redeclare(max_records_per_batch=400, max_records_per_run=1000)
    produced = env.produce(1800)
    first = plan_live_run(env.pipeline)
    assert first.total_records == 1000
    assert env.spark_job(first, run=RUN).returncode == 0
    second = plan_live_run(env.pipeline)
    assert second.total_records == 800
    assert env.spark_job(second, run=RunInfo("microingest_test", "manual__second")).returncode == 0
    env.assert_exactly_once(produced)
    assert plan_live_run(env.pipeline).ranges == ()


def test_a_retry_of_a_run_that_committed_everything_succeeds_with_nothing_left(env):
    produced = env.produce(600)
    plan = plan_live_run(env.pipeline)
    assert env.spark_job(plan, run=RUN).returncode == 0

    again = env.spark_job(plan, run=RUN)  # e.g. the acknowledgement of the last commit was lost

    assert again.returncode == 0, again.stdout[-3000:]
    assert '"batches": 1' in again.stdout and '"records_read": 600' in again.stdout
    assert "fenced" not in again.stdout
    env.assert_exactly_once(produced)
    assert len(history(env)) == 1


def test_the_time_budget_stops_a_run_between_batches_and_leaves_the_rest_to_the_next(env, tmp_path, finish):
    env.redeclare(max_records_per_batch=100, max_run_seconds=1)
    produced = env.produce(1200)
    plan = plan_live_run(env.pipeline)
    # The first batch is held after its commit until more than the budget has passed: on a fast machine all 12
    # batches could otherwise fit in one second, and the budget would never be spent.
    marker = tmp_path / "paused"
    proc = env.spark_job(plan, run=RUN, fault=f"after_commit:pause:{marker}", wait=False)
    assert reached_pause(proc, marker), finish(proc).stdout[-3000:]
    time.sleep(1.5)  # the job's clock started before its first batch: it has spent the budget too
    marker.unlink()
    result = finish(proc)

    assert result.returncode == 0, result.stdout[-3000:]
    stop = re.search(
        r"time budget of 1s spent after (\d+) batch\(es\); (\d+) records left for the next run", result.stdout
    )
    assert stop, result.stdout[-3000:]
    assert (int(stop[1]), int(stop[2])) == (1, 1100)
    assert len(history(env)) == 1
    env.redeclare(max_run_seconds=1800)
    env.ingest_all()
    env.assert_exactly_once(produced)


def test_a_run_reads_and_decodes_while_another_run_of_the_pipeline_holds_its_commit_open(env, tmp_path, finish):
    """Runs of one pipeline on disjoint partitions (as a backfill beside live runs): the second one's batch is read
    and decoded while the first one's commit, everything written, holds its locks; only the commits take turns."""
    produced = env.produce(900)
    first, second, third = plan_live_run(env.pipeline).ranges
    holding_marker, beside_marker = tmp_path / "holding", tmp_path / "beside"
    holding = env.spark_job([first], fault=f"before_commit:pause:{holding_marker}", wait=False)
    assert reached_pause(holding, holding_marker), finish(holding).stdout[-3000:]

    beside = env.spark_job([second], fault=f"after_decode:pause:{beside_marker}", wait=False)
    assert reached_pause(beside, beside_marker), finish(beside).stdout[-3000:]
    assert env.target_rows() == [], "decoded beside the open commit"
    holding_marker.unlink()
    beside_marker.unlink()

    assert finish(holding).returncode == 0 and finish(beside).returncode == 0
    assert env.spark_job([third]).returncode == 0
    env.assert_exactly_once(produced)


def test_a_batch_read_ahead_is_dropped_unwritten_when_the_commit_before_it_fails(env, tmp_path, finish):
    """While batch 1 commits, batch 2 is read and decoded (`spark.read_ahead`). Batch 1's connection is killed with
    its rows written and not committed: the run fails, batch 2 is waited for and dropped, and neither leaves a row,
    a dead letter, a history row or a ledger move; the retry lands every record once."""
    env.redeclare(max_records_per_batch=100)
    env.send([(b"k", b"not json")])  # first: in a batch of good records, under the dead-letter guard's limit
    produced = env.produce(300)
    ledger = env.ledger()
    marker = tmp_path / "holding"
    proc = env.spark_job(plan_live_run(env.pipeline), run=RUN, fault=f"before_commit:pause:{marker}", wait=False)
    assert reached_pause(proc, marker), finish(proc).stdout[-3000:]
    killed = env.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
        "AND state = 'idle in transaction' AND backend_xid IS NOT NULL"
    )
    marker.unlink()
    result = finish(proc)

    assert killed == [(True,)], "batch 1's transaction, everything written, was the one open"
    assert result.returncode != 0, result.stdout[-3000:]
    dropped = re.search(r"batch 2 read ahead \(.*\) dropped, nothing of it written: the batch before it", result.stdout)
    assert dropped, result.stdout[-3000:]
    assert "batch 1 of" not in result.stdout and "batch 2 of" not in result.stdout
    assert env.target_rows() == [] and env.dead_letters() == [] and history(env) == []
    assert env.ledger() == ledger

    env.ingest_all()
    env.assert_exactly_once(produced)
    assert [cls for _, _, cls, *_ in env.dead_letters()] == ["invalid_json"]


def test_a_batch_too_large_for_the_driver_to_collect_is_split_and_lands_once(submit_env):
    """The driver collects each batch decoded, up to spark.driver.maxResultSize (256m in the job's conf; 1m here,
    given to a spark-submit of its own). A batch over it fails before anything is written, and the run goes on in
    batches of half the size."""
    env = submit_env
    filler = "x" * 2500
    positions = env.send(
        [
            (
                f"k{i}".encode(),
                json_bytes(
                    {
                        "event_id": f"ev-{i}",
                        "user_id": "u",
                        "event_type": filler,
                        "amount": 1.5,
                        "event_time": 1_700_000_000_000,
                    }
                ),
            )
            for i in range(1200)
        ]
    )
    result = env.spark_job(plan_live_run(env.pipeline), extra_conf={"spark.driver.maxResultSize": "1m"})

    assert result.returncode == 0, result.stdout[-3000:]
    assert "more than the driver may collect decoded" in result.stdout and "splitting it" in result.stdout, (
        result.stdout[-3000:]
    )
    assert sorted((p, o) for p, o, _ in env.target_rows()) == sorted(positions)
    reads = [read for _, read, *_ in history(env)]
    assert sum(reads) == 1200 and max(reads) < 1200
