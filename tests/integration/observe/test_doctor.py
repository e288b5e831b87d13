"""`microingest doctor` on the real platform: a healthy pipeline passes; a consumer group something else commits to,
a ledger row changed by hand and unread records retention deleted are each named, with what to do."""

from __future__ import annotations

import json
import os
import subprocess

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from microingest.lag.mirror import group_id


def doctor(env):
    return subprocess.run(
        ["microingest", "doctor", env.pipeline.name, "--no-airflow"], capture_output=True, text=True, env=os.environ
    )


def test_the_doctor_names_each_disagreement_and_what_to_do(env):
    env.redeclare(dead_letter={"max_fraction": 1})
    for p in range(3):
        env.send_to(p, [(b"k", json.dumps({"event_id": f"{p}-{i}"}).encode()) for i in range(4)])
    env.send_to(0, [(b"k", b"not json")])
    env.ingest_all()
    healthy = doctor(env)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    assert "ok   the ledger's positions lie within what Kafka holds" in healthy.stdout
    assert f"ok   consumer group {group_id(env.pipeline.name)} agrees with the ledger" in healthy.stdout
    assert "ok   every position of the ledger (3) is where the batch it names ended" in healthy.stdout
    assert "warn 1 unresolved dead letter(s): invalid_json 1" in healthy.stdout

    topic = env.topic
    intruder = KafkaConsumer(**env.kafka, group_id=group_id(env.pipeline.name), enable_auto_commit=False)
    intruder.commit({TopicPartition(topic, 1): OffsetAndMetadata(4_000, "", -1)})
    intruder.close()
    env.query_commit(
        "UPDATE microingest.ledger SET batch_id = gen_random_uuid() WHERE pipeline = %s AND partition = 2",
        (env.pipeline.name,),
    )
    env.send_to(0, [(b"k", json.dumps({"event_id": f"late-{i}"}).encode()) for i in range(3)])
    admin = KafkaAdminClient(**env.kafka)
    admin.delete_records({TopicPartition(topic, 0): 7})
    admin.close()

    sick = doctor(env)
    assert sick.returncode == 1, sick.stdout + sick.stderr
    assert f"BAD  {topic}[0]: retention deleted offsets [5, 7) before they were read" in sick.stdout
    assert (
        f"BAD  {env.topic}[1]: consumer group {group_id(env.pipeline.name)} is ahead of the ledger (4000 > 4)"
        in sick.stdout
    )
    assert f"BAD  {env.topic}[2]: the ledger's position 4 names batch" in sick.stdout and "history lacks" in sick.stdout
    assert sick.stdout.count("what to do:") >= 4
