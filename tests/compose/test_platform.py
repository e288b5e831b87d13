"""The whole stack as docker-compose.yml runs it, driven from outside through its own faces (Airflow's REST API as
the admin, Kafka's external listener, Postgres): the demo pipelines on a Spark cluster that holds nothing of
microingest, every row exact; a Spark worker and the scheduler killed mid-run; `compose down` and `up`; a viewer who
can look but not trigger."""

from __future__ import annotations

import secrets
import time
from datetime import datetime
from decimal import Decimal

import pytest

from helpers.compose_stack import REGISTRY, produce_to
from helpers.demo_rows import EVENT_COLUMNS, ORDER_COLUMNS, expected_event, expected_order
from helpers.protobuf_corpus import serialized
from microingest.cli import demo_orders
from microingest.cli.demo import sample_events
from microingest.systems.airflow_api import AirflowApiError, AirflowClient


def run_to_success(api: AirflowClient, dag_id: str, tries: int = 2) -> list[str]:
    """Trigger the DAG until a run succeeds (a run a fault failed is retried by the next, as a scheduled one would
    be); the states of every run."""
    api.wait_for_dag(dag_id, timeout=300, say=lambda m: None)
    api.unpause(dag_id)
    states = []
    for _ in range(tries):
        run = api.wait_for_run(dag_id, api.trigger(dag_id, note="compose test"), timeout=900)
        states.append(run.state)
        if run.state == "success":
            return states
    raise AssertionError(f"{dag_id}: no run succeeded ({states})")


def event_rows(stack, ids: list[str]) -> dict[str, tuple]:
    return table_rows(stack, "public.demo_events", ids)


def table_rows(stack, table: str, ids: list[str]) -> dict[str, tuple]:
    """A table of the demo events' columns, by event id, after checking no event landed twice."""
    rows = stack.query(f"SELECT {EVENT_COLUMNS} FROM {table} WHERE event_id = ANY(%s)", (ids,))
    by_id = {r[0]: r for r in rows}
    assert len(by_id) == len(rows), "an event landed twice"
    return by_id


def events_by_id(records: list[tuple]) -> dict[str, tuple]:
    return {row[0]: row for row in (expected_event(value) for _, value in records)}


def test_the_demo_events_land_exactly_through_spark_connect_on_a_cluster_with_none_of_microingest(stack, platform):
    records = sample_events(3000, seed=1)
    produce_to("demo_events", records)
    assert run_to_success(platform, "microingest_demo_events") == ["success"]
    produced = events_by_id(records)
    assert event_rows(stack, list(produced)) == produced
    # the executors that decoded them run the Spark image's Python, which has no microingest
    refused = stack.exec_fails("spark-worker-1", "python3.11", "-c", "import microingest")
    assert "No module named 'microingest'" in refused


def test_the_demo_orders_land_exactly(stack, platform):
    orders = demo_orders.sample_orders(500, seed=2)
    produce_to("orders", [demo_orders.as_record(o) for o in orders])
    assert run_to_success(platform, "microingest_orders") == ["success"]
    rows = stack.query(
        f"SELECT {ORDER_COLUMNS} FROM public.orders WHERE order_id = ANY(%s::uuid[])",
        ([o["order_id"] for o in orders],),
    )
    assert sorted(rows) == sorted(expected_order(o) for o in orders)
    assert all(isinstance(p, Decimal) for row in rows for p in row[8])


def test_spark_submit_jobs_ship_their_python_to_the_cluster_and_land_exactly(stack, platform):
    """A pipeline on microingest_spark_submit: the driver in an Edge worker's container, the executors on the Spark
    workers, which get microingest as the job's archive."""
    records = sample_events(2000, seed=5)
    produce_to("events_submit", records)
    assert run_to_success(platform, "microingest_events_submit") == ["success"]
    produced = events_by_id(records)
    assert table_rows(stack, "public.events_submit", list(produced)) == produced


def test_a_transform_sql_statement_runs_on_the_cluster_and_its_rows_land_exactly(stack, platform):
    records = sample_events(2000, seed=6)
    produce_to("events_sql", records)
    assert run_to_success(platform, "microingest_events_sql") == ["success"]
    kept = {k.upper(): (k.upper(), *row[1:]) for k, row in events_by_id(records).items() if row[2] != "page_view"}
    assert table_rows(stack, "public.events_sql", list(kept)) == kept
    [(read, written, filtered)] = stack.query(
        "SELECT sum(records_read), sum(rows_written), sum(filtered) FROM microingest.batches "
        "WHERE pipeline = 'events_sql' AND kind = 'ingest'",
    )
    assert (read, written, filtered) == (len(records), len(kept), len(records) - len(kept))


EVENT_PROTO = """syntax = "proto3";
package microingest.compose;
import "google/protobuf/timestamp.proto";
message Event {
  string event_id = 1;
  double amount = 2;
  google.protobuf.Timestamp event_time = 3;
}
"""


def test_protobuf_values_from_the_stacks_registry_land_exactly(stack, platform, tmp_path):
    events = [
        {"event_id": f"proto-{i}", "amount": i / 8, "event_time": f"2026-11-29T12:{i // 60 % 60:02d}:{i % 60:02d}Z"}
        for i in range(500)
    ]
    values = serialized(tmp_path, EVENT_PROTO, {"url": REGISTRY}, "events-proto", events)
    produce_to("events_proto", [(e["event_id"].encode(), v) for e, v in zip(events, values, strict=True)])
    assert run_to_success(platform, "microingest_events_proto") == ["success"]
    rows = stack.query("SELECT event_id, amount, event_time FROM public.events_proto")
    assert sorted(rows) == sorted((e["event_id"], e["amount"], datetime.fromisoformat(e["event_time"])) for e in events)


def test_a_killed_spark_worker_and_scheduler_mid_run_lose_and_duplicate_nothing(stack, platform):
    dead_letters = "SELECT count(*) FROM microingest.dead_letters WHERE pipeline = 'demo_events'"
    [(before,)], [(dead_before,)] = stack.query("SELECT count(*) FROM public.demo_events"), stack.query(dead_letters)
    records = sample_events(60_000, seed=3)
    # some that can never land: each must end as a dead letter, not a stuck run
    broken = [(b"k", b"not json"), (b"k", b'{"user_id": "no event_id"}')] * 10
    produce_to("demo_events", records + broken)
    dag_id = "microingest_demo_events"
    platform.unpause(dag_id)
    run_id = platform.trigger(dag_id, note="compose test: faults")
    deadline = time.monotonic() + 600
    while platform.dag_run(dag_id, run_id).tasks.get("ingest") != "running":
        assert time.monotonic() < deadline, "the ingest task never started"
        time.sleep(1)
    stack.kill("spark-worker-1")
    stack.kill("airflow-scheduler")
    stack.up()  # what `restart: unless-stopped` does on a host whose engine restarts them
    run = platform.wait_for_run(dag_id, run_id, timeout=1200)
    if run.state != "success":
        run_to_success(platform, dag_id, tries=1)
    produced = events_by_id(records)
    assert event_rows(stack, list(produced)) == produced
    [(dead,)] = stack.query(dead_letters)
    assert dead == dead_before + len(broken)
    [(rows, distinct)] = stack.query(
        "SELECT count(*), count(DISTINCT (source_partition, source_offset)) FROM public.demo_events"
    )
    assert rows == distinct == before + len(records)


def test_down_and_up_keep_everything_and_the_next_run_ingests_only_what_is_new(stack, platform):
    before = stack.query("SELECT count(*) FROM microingest.batches WHERE pipeline = 'demo_events'")
    [(rows_before,)] = stack.query("SELECT count(*) FROM public.demo_events")
    stack.restart()
    records = sample_events(1000, seed=4)
    produce_to("demo_events", records)
    assert run_to_success(platform, "microingest_demo_events") == ["success"]
    [(rows_after,)] = stack.query("SELECT count(*) FROM public.demo_events")
    assert rows_after == rows_before + len(records)
    after = stack.query("SELECT count(*) FROM microingest.batches WHERE pipeline = 'demo_events'")
    assert after[0][0] > before[0][0]
    produced = events_by_id(records)
    assert event_rows(stack, list(produced)) == produced


def test_a_viewer_sees_the_pipelines_but_cannot_trigger_them(stack, platform):
    password = secrets.token_urlsafe(16)
    stack.exec(
        "airflow-api-server",
        "airflow",
        "users",
        "create",
        "--username",
        "viewer",
        "--role",
        "Viewer",
        "--firstname",
        "View",
        "--lastname",
        "Er",
        "--email",
        "viewer@microingest.invalid",
        stdin=f"{password}\n{password}\n",
    )
    viewer = AirflowClient(user="viewer", password=password)
    dags = {d["dag_id"] for d in viewer.get("/api/v2/dags")["dags"]}
    assert {"microingest_demo_events", "microingest_orders"} <= dags
    with pytest.raises(AirflowApiError) as refused:
        viewer.trigger("microingest_demo_events")
    assert refused.value.status == 403
    with pytest.raises(AirflowApiError) as refused:
        viewer.unpause("microingest_orders")
    assert refused.value.status == 403


def test_no_service_logs_a_secret(stack, platform):
    for service in stack.spec["services"]:
        log = stack.logs(service)
        assert not [name for name, value in stack.operator_secrets.items() if value in log], service
