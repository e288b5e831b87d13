"""The story of an offset (`microingest explain`), told from what the real platform kept: a row, a dead letter, a
skip, a retention gap, a record not read yet or not written yet, an upsert key's newer record, an aggregate's group,
and the consumer group mirror beside the ledger."""

from __future__ import annotations

import json
import os
import subprocess

from kafka import KafkaAdminClient, TopicPartition

from helpers.pipeline_env import UPSERT_TARGET
from microingest.observe.offset_reads import offset_facts
from microingest.observe.offset_story import story
from microingest.plan.request import SkipRequest
from microingest.plan.skip import plan_skip


def event(i: int, **fields) -> bytes:
    return json.dumps({"event_id": f"e{i}", "event_type": "click", **fields}).encode()


def told(env, offset: int, partition: int = 0) -> str:
    return "\n".join(story(offset_facts(env.pipeline, env.topic, partition, offset)))


def test_each_offset_tells_what_became_of_it(env, kafka):
    env.redeclare(dead_letter={"max_fraction": 1})
    env.send_to(0, [(b"k", event(0)), (b"k", event(1)), (b"k", b"not json"), (b"k", event(3))])
    env.ingest_all()
    [(batch_id,)] = env.query(
        "SELECT batch_id::text FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)
    )

    row = told(env, 1)
    assert row.startswith(f"{env.topic}[0]@1 of pipeline {env.pipeline.name}: a row of {env.pipeline.target_table}")
    assert f"read by ingest batch {batch_id}" in row
    assert "partition 0: live position 4, the consumer group mirror agrees; Kafka holds [0, 4)" in row
    assert "a dead letter (invalid_json: " in told(env, 2)
    assert "not written yet: the partition's log ends at 4" in told(env, 9)

    env.send_to(0, [(b"k", event(i)) for i in range(4, 8)])
    assert "not read yet (the live position is 4)" in told(env, 5)
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, 6, "incident 7"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert "skipped, kept as a dead letter: skipped by on-call: incident 7" in told(env, 5)

    admin = KafkaAdminClient(**env.kafka)
    admin.delete_records({TopicPartition(env.topic, 0): 7})
    admin.close()
    env.redeclare(on_retention_gap="skip")
    env.ingest_all()
    lost = told(env, 6)
    assert "lost: retention deleted it before it was read" in lost and "lost in the gap recorded by" in lost

    cli = subprocess.run(
        ["microingest", "explain", env.pipeline.name, "--partition", "0", "--offset", "1", "--json"],
        capture_output=True,
        text=True,
        env=os.environ,
    )
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert (
        out["has_row"]
        and out["read_by"][0]["batch_id"] == batch_id
        and out["story"][0].endswith(f"a row of {env.pipeline.target_table}")
    )


def test_an_upsert_record_tells_which_newer_record_its_key_holds(env):
    env.replace_target(UPSERT_TARGET)
    env.redeclare(sink_mode="upsert_latest")
    env.send_to(1, [(b"a", event(0)), (b"a", event(1)), (b"b", event(2))])
    env.ingest_all()
    assert "superseded: its key's row in" in told(env, 0, 1) and "now comes from offset 1" in told(env, 0, 1)
    assert "a row of" in told(env, 1, 1) and "with key 'a'" in told(env, 1, 1)


def test_an_aggregated_record_tells_its_group(env):
    env.replace_target("event_type text PRIMARY KEY, events bigint NOT NULL")
    env.redeclare(
        sink_mode="aggregate",
        schema={"event_id": "string", "event_type": {"type": "string", "required": True}},
        aggregate={"group_by": ["event_type"], "measures": {"events": "count"}},
    )
    env.send_to(0, [(b"k", event(0)), (b"k", event(1, event_type="view"))])
    env.ingest_all()
    assert "counted in" in told(env, 1) and "in the group {'event_type': 'view'}" in told(env, 1)
