"""A warning before retention deletes unread records, on the real broker: a topic of minutes' retention whose unread
records are older than the margin leaves is AT_RISK (in the status, `microingest lag` and the SLA check) while they
are all still there; left alone, the broker deletes them and the retention-gap handling records what was lost."""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import datetime, timedelta, timezone

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource

from microingest.declare.lag_policy import SlaPolicy
from microingest.lag.checks import health_check
from microingest.lag.status import pipeline_status
from microingest.systems.kafka_access import partition_bounds

RETENTION = timedelta(minutes=10)
MARGIN = timedelta(minutes=5)


def set_retention(kafka: dict, topic: str, ms: int) -> None:
    admin = KafkaAdminClient(**kafka)
    try:
        admin.alter_configs([ConfigResource("TOPIC", topic, {"retention.ms": str(ms)})])
    finally:
        admin.close()


def ms_ago(delta: timedelta) -> int:
    return int((datetime.now(timezone.utc) - delta).timestamp() * 1000)


def event(i: int) -> tuple[bytes, bytes]:
    return b"k", json.dumps({"event_id": f"r{i}"}).encode()


def test_unread_records_retention_is_about_to_delete_are_at_risk_before_they_go(env, kafka):
    env.redeclare(lag={"retention_margin": "5 minutes"})
    topic = env.topic
    set_retention(kafka, topic, int(RETENTION.total_seconds() * 1000))
    # Partition 0: one record read, then five written eight minutes ago (gone in two: within the margin).
    # Partition 1: three written now (ten minutes left: outside it).
    old = ms_ago(timedelta(minutes=8))
    env.send_to(0, [event(0)], timestamp_ms=old)
    env.ingest_all()
    unread = env.send_to(0, [event(i) for i in range(1, 6)], timestamp_ms=old)
    env.send_to(1, [event(i) for i in range(6, 9)])

    status = pipeline_status(env.pipeline)
    earliest, _ = partition_bounds(kafka, topic)
    assert earliest[0] == 0, "the at-risk records are all still there"
    assert [p for p, _ in status.at_risk] == [(topic, 0)]
    left = status.retention[(topic, 0)]
    assert left.cause == "retention.ms" and 0 < left.seconds < (RETENTION - timedelta(minutes=8)).total_seconds()
    assert status.retention[(topic, 1)].seconds > MARGIN.total_seconds() and not status.retention[(topic, 1)].at_risk(
        300
    )
    as_dict = status.to_dict()
    assert as_dict["at_risk"] is True and as_dict["retention_margin_seconds"] == 300

    lag = subprocess.run(["microingest", "lag", env.pipeline.name], capture_output=True, text=True, env=os.environ)
    assert f"AT_RISK: {topic}[0]'s unread records may be deleted by retention.ms in" in lag.stdout, lag.stdout
    check = health_check(env.pipeline, SlaPolicy(max_time_lag_seconds=86400, fail_at_risk=True))
    assert not check.met and check.breach == "retention" and f"AT_RISK: {topic}[0]" in check.summary
    assert health_check(env.pipeline, SlaPolicy(max_time_lag_seconds=86400)).met, "without fail_at_risk: a warning"

    # Nothing is done: retention comes (sooner here, to keep the test short) and the broker deletes them.
    set_retention(kafka, topic, 1000)
    gone = {0: unread[-1][1] + 1, 1: 3}  # partition 1's too: a read may not race the broker's deletion
    deadline = time.monotonic() + 300
    while any(partition_bounds(kafka, topic)[0][p] < end for p, end in gone.items()) and time.monotonic() < deadline:
        time.sleep(2)
    earliest, _ = partition_bounds(kafka, topic)
    assert {p: earliest[p] for p in gone} == gone, "the broker deleted the unread records"
    env.redeclare(on_retention_gap="skip")
    env.ingest_all()
    [(kind, gaps)] = env.query(
        "SELECT kind, gaps FROM microingest.batches WHERE pipeline = %s AND gaps IS NOT NULL", (env.pipeline.name,)
    )
    assert (kind, gaps) == ("pin", [{"topic": topic, "partition": 0, "from": 1, "until": 6}])
    assert env.ledger()[0] == 6, "the position moved past the gap: nothing deleted counts as waiting"
