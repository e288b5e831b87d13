"""A pipeline reading topics by pattern, run by Airflow: one run reads both topics, its Asset event and lineage name
them, and a backfill through the REST API names its topic (or fails its plan asking which)."""

from test_asset_events import lineage_events

from helpers.pipeline_env import Env
from microingest.systems.kafka_access import create_topic, json_bytes, produce


def send(env: Env, topic: str, n: int) -> list[tuple[str, int, int]]:
    records = [(b"k", json_bytes({"event_id": f"{topic}/{i}"})) for i in range(n)]
    return [(topic, p, o) for p, o in produce(env.kafka, topic, records, partition_of=lambda i, k: 0)]


def test_a_run_reads_every_matched_topic_and_a_backfill_names_one(api, served, kafka):
    env = served["topics"]
    dag_id, first, second = env.pipeline.dag_id, env.topic, f"{env.topic}-b"
    create_topic(kafka, second, 1)
    sent = send(env, first, 30) + send(env, second, 20)

    run = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert run.state == "success", run.tasks
    rows = env.query(f"SELECT source_topic, source_partition, source_offset FROM {env.pipeline.target_table}")
    assert sorted(rows) == sorted(sent)
    [event] = api.asset_events(dag_id, run.run_id)
    assert {r["topic"] for r in event["extra"]["ranges"]} == {first, second}
    [lineage] = lineage_events(event["extra"]["batch_ids"])
    assert sorted(i["name"] for i in lineage["inputs"]) == [first, second]

    asked = api.wait_for_run(dag_id, api.trigger(dag_id, {"backfill_ranges": {"0": [0, 5]}}), timeout=600)
    assert asked.tasks["ingest"] == "failed"
    replay = {"backfill_ranges": {"0": [0, 5]}, "topic": second, "overlap": "replace"}
    replayed = api.wait_for_run(dag_id, api.trigger(dag_id, replay), timeout=600)
    assert replayed.state == "success", replayed.tasks
    [event] = api.asset_events(dag_id, replayed.run_id)
    assert event["extra"]["ranges"] == [{"topic": second, "partition": 0, "from": 0, "until": 5}]
    rows = env.query(f"SELECT source_topic, source_partition, source_offset FROM {env.pipeline.target_table}")
    assert sorted(rows) == sorted(sent), "replaced, not doubled"
