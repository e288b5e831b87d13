"""Consumer lag against the real broker and Postgres: offset and time lag from records with known timestamps, states
judged on the history planning records, and the ledger mirrored to a consumer group Kafka's own tool describes."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from microingest import settings
from microingest.batches import OffsetRange, RunInfo
from microingest.commit.ledger import pin_positions
from microingest.lag.checks import health_check
from microingest.lag.figures import partition_lags
from microingest.lag.mirror import group_id
from microingest.lag.states import LagState
from microingest.lag.status import pipeline_status
from microingest.plan.live import plan_live_run
from microingest.systems.kafka_access import create_topic, partition_bounds
from microingest.systems.pipeline_systems import PipelineSystems

# Recent enough for the broker's 7-day retention, which deletes older records even from the active segment.
T0 = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(hours=3)


def at_ms(seconds: float) -> int:
    return int((T0 + timedelta(seconds=seconds)).timestamp() * 1000)


def pin(env, positions: dict[int, int]) -> None:
    """Set ledger positions the way a start_from=latest pipeline records them (a pin batch)."""
    pin_positions(
        env.pg,
        env.pipeline.name,
        [OffsetRange(env.topic, p, o, o, None) for p, o in positions.items()],
        RunInfo(),
        {},
    )


@pytest.mark.quick
def test_offset_and_time_lag_come_from_the_ledger_and_the_oldest_waiting_record(env, kafka):
    # Partition p gets 30 records, one per second from T0; record i of the topic is stamped T0 + i seconds.
    produced = env.produce(90, timestamp_of=lambda i: at_ms(i))
    stamp = {(p, o): at_ms(i) for i, (p, o, _) in enumerate(produced)}
    _, ends = partition_bounds(kafka, env.topic)
    parts = sorted(ends)
    pin(env, {parts[0]: 10, parts[1]: ends[parts[1]], parts[2]: 0})
    now = T0 + timedelta(hours=1)

    lags = {lag.partition: lag for lag in partition_lags(env.pipeline, PipelineSystems.of(env.pipeline), now)}

    assert lags[parts[0]].lag == ends[parts[0]] - 10
    expected = now - datetime.fromtimestamp(stamp[(parts[0], 10)] / 1000, timezone.utc)
    assert (lags[parts[0]].time_lag, lags[parts[0]].time_source) == (expected, "record")
    assert (lags[parts[1]].lag, lags[parts[1]].time_lag) == (0, timedelta(0))  # caught up: no age, however idle
    expected = now - datetime.fromtimestamp(stamp[(parts[2], 0)] / 1000, timezone.utc)
    assert (lags[parts[2]].lag, lags[parts[2]].time_lag) == (ends[parts[2]], expected)

    # Without the records, interpolated from observations: the log of parts[0] ended at 0 until T0 and at its end
    # from T0 + 90s, so its offset 10 of ends[p] was written a fraction (10 + 1) / end of the way in between.
    points = {(env.topic, parts[0]): [(T0, 0), (T0 + timedelta(seconds=90), ends[parts[0]])]}
    lag = next(
        lag
        for lag in partition_lags(env.pipeline, PipelineSystems.of(env.pipeline), now, points, fetch_records=False)
        if lag.partition == parts[0]
    )
    written = T0 + timedelta(seconds=90) * (11 / ends[parts[0]])
    assert (lag.time_lag, lag.time_source) == (now - written, "interpolated")


def test_a_pipeline_that_never_committed_while_records_wait_is_stop(env):
    env.produce(60)
    plan_live_run(env.pipeline)  # observed: records wait, nothing ever committed
    status = pipeline_status(env.pipeline)
    assert status.verdict.state is LagState.STOP and "never committed" in status.verdict.reason
    assert status.offset_lag == 60
    # STALL and the SLA sensor failing on it: test_lag_airflow.py


def test_a_record_after_a_quiet_spell_is_judged_from_when_the_sla_check_last_saw_the_partition_caught_up(env):
    env.redeclare(lag={"window_seconds": 1800, "sla": {"max_time_lag_seconds": 86400}})
    sla = env.pipeline.lag.sla
    env.produce(30)
    env.ingest_all()
    committed = env.query(
        "SELECT max(committed_at) FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)
    )[0][0]
    # Two hours of a quiet topic, nothing to commit; the SLA check's clock is its `now`, so no test waits them out.
    quiet = committed + timedelta(hours=2)
    assert health_check(env.pipeline, sla, quiet).met
    seen = env.query(
        "SELECT partition, position, log_end, observed_at FROM microingest.lag_observations "
        "WHERE pipeline = %s AND source = 'sla'",
        (env.pipeline.name,),
    )
    assert sorted(seen) == [(p, o, o, quiet) for p, o in sorted(env.ledger().items())]

    env.produce(1, start=30)
    check = health_check(env.pipeline, sla, quiet + timedelta(minutes=1))
    assert (check.met, check.state, check.offset_lag) == (True, "OK", 1), check  # was STOP: nothing committed for 2h
    # No run comes for it: one window after the partition was last seen caught up, the waiting record is a stop.
    check = health_check(env.pipeline, sla, quiet + timedelta(minutes=31))
    assert (check.met, check.breach, check.state) == (False, "state", "STOP"), check
    assert "last seen caught up 31min ago and nothing was committed since (window 30min)" in check.summary


def test_a_failing_planning_is_err_until_one_succeeds(env):
    missing = "no-such-topic-" + env.pipeline.name.replace("_", "-")
    env.redeclare(topic=missing)
    try:
        plan_live_run(env.pipeline)
    except Exception as exc:
        assert "does not exist" in str(exc)
    else:
        raise AssertionError("planning a missing topic succeeded")
    status = pipeline_status(env.pipeline)
    assert status.verdict.state is LagState.ERR and "does not exist" in status.verdict.reason

    # The topic appears: Kafka reads again, but the verdict stays the failed planning's until a planning succeeds.
    create_topic(env.kafka, missing, 1)
    status = pipeline_status(env.pipeline)
    assert status.verdict.state is LagState.ERR and status.verdict.reason.startswith("planning fails:")
    plan_live_run(env.pipeline)
    status = pipeline_status(env.pipeline)
    assert status.verdict.state is not LagState.ERR, status.verdict


def describe_group(group: str) -> dict[int, tuple[int, int, int]]:
    """`kafka-consumer-groups.sh --describe` (its class, from the broker's libs): partition -> (current, end, lag)."""
    libs = settings.install_dir() / "kafka" / "libs"
    bootstrap = json.loads(os.environ["AIRFLOW_CONN_MICROINGEST_KAFKA"])["extra"]["bootstrap.servers"]
    result = subprocess.run(
        [
            "java",
            "-cp",
            f"{libs}/*",
            "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
            "--bootstrap-server",
            bootstrap,
            "--describe",
            "--group",
            group,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {}
    for line in result.stdout.splitlines():
        cells = line.split()
        if cells[:1] == [group]:
            rows[int(cells[2])] = (int(cells[3]), int(cells[4]), int(cells[5]))
    return rows


def test_the_ledger_is_mirrored_to_a_consumer_group_kafkas_tool_describes(env):
    env.produce(120)
    env.ingest_all()
    ledger = env.ledger()
    assert describe_group(group_id(env.pipeline.name)) == {p: (o, o, 0) for p, o in ledger.items()}

    more = env.produce(30, start=120)
    described = describe_group(group_id(env.pipeline.name))
    assert sum(lag for _, _, lag in described.values()) == len(more)
    assert {p: current for p, (current, _, _) in described.items()} == ledger  # nothing but the ledger moves it
