"""What a run tells the world, through the running Airflow: the Asset event of the batches it committed (once each,
a failed run's included), the demo's downstream DAG that the event schedules, and the run's note."""

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from helpers.pipeline_env import SERVED_FOLDER, Env
from microingest.declare.files import load_pipeline_file
from microingest.systems.kafka_access import create_topic, json_bytes

REPO = Path(__file__).resolve().parents[3]
SUMMARY_DAG = "demo_events_summary"


def history(env: Env, run_id: str) -> list[tuple]:
    return env.query(
        "SELECT batch_id::text, kind, ranges, rows_written FROM microingest.batches WHERE pipeline = %s "
        "AND run_id = %s AND kind <> 'pin' ORDER BY committed_at",
        (env.pipeline.name, run_id),
    )


def expected_ranges(batches: list[tuple]) -> list[dict]:
    """The batches' offsets, one by one, gathered into the runs of consecutive offsets of each partition."""
    offsets = sorted(
        {
            (r["topic"], r["partition"], o)
            for _, _, ranges, _ in batches
            for r in ranges
            for o in range(r["from"], r["until"])
        }
    )
    spans: list[dict] = []
    for topic, partition, offset in offsets:
        last = spans[-1] if spans else {}
        if (last.get("topic"), last.get("partition"), last.get("until")) == (topic, partition, offset):
            last["until"] += 1
        else:
            spans.append({"topic": topic, "partition": partition, "from": offset, "until": offset + 1})
    return spans


def clear(api, dag_id: str, run_id: str, task_id: str) -> None:
    api.post(
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dag_run_id": run_id, "task_ids": [task_id], "dry_run": False, "only_failed": False},
    )


@pytest.fixture(scope="module")
def demo(api, pg, kafka, served) -> Env:
    """The shipped demo declaration, served unscheduled (its runs are the test's), with its summary DAG."""
    declaration = yaml.safe_load((REPO / "pipelines" / "demo_events.yaml").read_text())
    declaration.pop("schedule", None)
    path = Path(SERVED_FOLDER) / "demo_events.yaml"
    create_topic(kafka, declaration["topic"], 3)
    path.write_text(yaml.safe_dump(declaration))
    env = Env(load_pipeline_file(path), pg, kafka, Path(SERVED_FOLDER))
    for dag_id in (env.pipeline.dag_id, SUMMARY_DAG):
        api.wait_for_dag(dag_id, timeout=240, say=lambda m: None)
        api.unpause(dag_id)
    return env


def test_a_commit_is_announced_once_and_the_demo_summary_reads_just_those_rows(api, demo, pg, kafka):
    produced = demo.produce(300)
    dag_id = demo.pipeline.dag_id
    run = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})

    batches = history(demo, run.run_id)
    [event] = api.asset_events(dag_id, run.run_id)
    extra = event["extra"]
    host, port, db = pg["host"], pg["port"], pg["dbname"]
    assert event["uri"] == f"postgres://{host}:{port}/{db}/public/demo_events"
    assert event["name"] == f"{db}.public.demo_events"
    assert (extra["pipeline"], extra["kind"], extra["run_id"]) == ("demo_events", "live", run.run_id)
    assert extra["batch_ids"] == [b[0] for b in batches]
    assert extra["ranges"] == expected_ranges(batches)
    assert extra["rows_written"] == sum(b[3] for b in batches) == extra["records_read"]
    assert extra["dead_letters"] == 0
    positions = {(r["partition"], o) for r in extra["ranges"] for o in range(r["from"], r["until"])}
    assert {(p, o) for p, o, _ in produced} <= positions
    note = api.note(dag_id, run.run_id)
    assert re.fullmatch(
        rf"{len(batches)} batch(es)?, {extra['records_read']:,} records, "
        rf"{extra['rows_written']:,} rows, 0 dead letters, \d+ (s|min \d+ s)",
        note,
    ), note
    assert_lineage(demo, pg, kafka, "COMPLETE", extra)

    [announced] = api.wait_for_downstream(dag_id, run.run_id)
    [created] = announced["created_dagruns"]  # the run the scheduler made of this run's event
    assert created["dag_id"] == SUMMARY_DAG
    summary_run = created["run_id"]
    summary = api.wait_for_run(SUMMARY_DAG, summary_run, timeout=600)
    assert summary.state == "success", summary.describe()
    assert api.xcom(summary, "summarize")["batch_ids"] == extra["batch_ids"]
    by_batch = demo.query(
        "SELECT batch_id::text, sum(events)::bigint FROM public.demo_events_summary "
        "WHERE batch_id = ANY(%s::uuid[]) GROUP BY 1 ORDER BY 1",
        (extra["batch_ids"],),
    )
    landed = demo.query(
        "SELECT batch_id::text, count(*) FROM public.demo_events WHERE batch_id = ANY(%s::uuid[]) "
        "GROUP BY 1 ORDER BY 1",
        (extra["batch_ids"],),
    )
    assert by_batch == landed and sum(n for _, n in landed) == extra["rows_written"]

    again = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert again.tasks == {"ingest": "skipped", "announce": "skipped"}
    assert api.asset_events(dag_id, again.run_id) == [] and api.note(dag_id, again.run_id) == "nothing new"


def test_a_run_failing_after_a_committed_batch_announces_that_batch_once(api, served, pg, kafka):
    env = served["announced"]
    dag_id = env.pipeline.dag_id
    good = [(b"k", json_bytes({"event_id": f"ev-{i}"})) for i in range(120)]
    env.send_to(0, good[:100] + [(b"k", b"not json")] + good[100:])
    run = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert (run.state, run.tasks) == ("failed", {"ingest": "failed", "announce": "success"})

    [committed] = history(env, run.run_id)
    [event] = api.asset_events(dag_id, run.run_id)
    assert event["extra"]["batch_ids"] == [committed[0]]
    assert event["extra"]["ranges"] == [{"topic": env.topic, "partition": 0, "from": 0, "until": 100}]
    assert event["extra"]["rows_written"] == 100
    note = api.note(dag_id, run.run_id)
    assert note.startswith("1 batch, 100 records, 100 rows, 0 dead letters, ") and "then failed" in note, note
    assert_lineage(env, pg, kafka, "FAIL", event["extra"])  # the failed run's lineage says what it committed

    clear(api, dag_id, run.run_id, "announce")  # a second try of the announcement owes nothing
    run = api.wait_for_run(dag_id, run.run_id, timeout=600)
    assert run.tasks["announce"] == "skipped" and run.tries["announce"] == 2
    assert len(api.asset_events(dag_id, run.run_id)) == 1


def lineage_events(batch_ids: list[str]) -> list[dict]:
    """The OpenLineage events of the ingest task whose run committed these batches (the platform's file transport)."""
    path = json.loads(os.environ["AIRFLOW__OPENLINEAGE__TRANSPORT"])["log_file_path"]
    with open(path) as f:
        events = [json.loads(line) for line in f if line.strip()]
    return [e for e in events if e["run"]["facets"].get("microingest_offsets", {}).get("batchIds") == batch_ids]


def assert_lineage(env: Env, pg: dict, kafka: dict, event_type: str, extra: dict) -> None:
    [event] = lineage_events(extra["batch_ids"])
    assert (event["eventType"], event["job"]["name"]) == (event_type, f"{env.pipeline.dag_id}.ingest")
    [source] = event["inputs"]
    assert (source["namespace"], source["name"]) == (f"kafka://{kafka['bootstrap_servers'][0]}", env.topic)
    target, dead = event["outputs"]
    schema, table = env.pipeline.target_table.split(".")
    assert (target["namespace"], target["name"]) == (
        f"postgres://{pg['host']}:{pg['port']}",
        f"{pg['dbname']}.{schema}.{table}",
    )
    assert {f["name"] for f in target["facets"]["schema"]["fields"]} >= set(env.pipeline.value_columns)
    assert target["outputFacets"]["outputStatistics"]["rowCount"] == extra["rows_written"]
    assert dead["outputFacets"]["outputStatistics"]["rowCount"] == extra["dead_letters"]
    assert event["run"]["facets"]["microingest_offsets"]["ranges"] == extra["ranges"]
    text = json.dumps(event)
    assert pg["password"] not in text and "password" not in text.lower()
