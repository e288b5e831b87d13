"""`make demo`: produce sample events, run the demo pipeline's DAG through Airflow, print the outcome; then the same
for sample orders through the `orders` pipeline (`demo_orders`).

Talks to the running platform only through its public faces: Kafka, Airflow's REST API (as the UI user) and
Postgres. Each run produces a fresh set of events, so a second run shows that only new records are ingested.
"""

from __future__ import annotations

import os
import random
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone

from psycopg2 import sql

from microingest.cli import demo_orders
from microingest.declare.files import get_pipeline
from microingest.declare.identifiers import table_identifier
from microingest.lag.status import pipeline_status
from microingest.lag.text import status_lines
from microingest.systems.airflow_api import AirflowClient, DagRun, base_url, credentials
from microingest.systems.kafka_access import create_topic, json_bytes, partition_bounds, produce
from microingest.systems.pipeline_systems import PipelineSystems

PIPELINE = "demo_events"
PARTITIONS = 3
EVENTS = int(os.environ.get("MICROINGEST_DEMO_EVENTS", "10000"))
EVENT_TYPES = ("page_view", "click", "add_to_cart", "purchase")
ORDERS = int(os.environ.get("MICROINGEST_DEMO_ORDERS", "500"))


def sample_events(n: int, seed: int) -> list[tuple[bytes, bytes]]:
    rnd = random.Random(seed)
    start = datetime.now(timezone.utc) - timedelta(hours=1)
    out = []
    for i in range(n):
        user = f"user-{rnd.randrange(500):03d}"
        kind = rnd.choice(EVENT_TYPES)
        event = {
            "event_id": str(uuid.UUID(int=rnd.getrandbits(128))),
            "user_id": user,
            "event_type": kind,
            "amount": round(rnd.uniform(1, 200), 2) if kind == "purchase" else None,
            "event_time": (start + timedelta(milliseconds=i * 360)).isoformat(),
        }
        out.append((user.encode(), json_bytes(event)))
    return out


SUMMARY_DAG = "demo_events_summary"  # dags/demo_events_summary.py


def run_dag(api: AirflowClient, dag_id: str, timeout: float = 900) -> list[DagRun]:
    """Unpause, trigger one run and wait for it and for any scheduled run the unpausing started.

    Returns every run that started during the demo, oldest first, with its task states."""
    since = datetime.now(timezone.utc).isoformat()
    api.unpause(dag_id)
    run_id = api.trigger(dag_id, note="make demo")
    print(f"triggered {dag_id} run {run_id}", flush=True)
    deadline, seen = time.time() + timeout, None
    while time.time() < deadline:
        listed = api.get(f"/api/v2/dags/{dag_id}/dagRuns", order_by="start_date", start_date_gte=since)["dag_runs"]
        listed += api.get(f"/api/v2/dags/{dag_id}/dagRuns", state=["running", "queued"])["dag_runs"]
        ids = list(dict.fromkeys([r["dag_run_id"] for r in listed] + [run_id]))
        runs = [api.dag_run(dag_id, i) for i in ids]
        line = "; ".join(r.describe() for r in runs)
        if line != seen:
            print(f"  {line}", flush=True)
            seen = line
        if all(r.finished for r in runs):
            return runs
        time.sleep(3)
    raise TimeoutError(f"{dag_id} runs did not finish within {timeout:.0f}s")


def report(pipeline, systems: PipelineSystems) -> None:
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL("SELECT count(*), count(DISTINCT (source_partition, source_offset)) FROM {}").format(
                table_identifier(pipeline.target_table)
            )
        )
        rows, distinct = cur.fetchone()
        cur.execute(
            "SELECT count(*), coalesce(sum(rows_written), 0), max(committed_at) FROM microingest.batches "
            "WHERE pipeline = %s AND kind = 'ingest'",
            (pipeline.name,),
        )
        batches, written, last = cur.fetchone()
        cur.execute(
            "SELECT rows_written, extract(epoch FROM committed_at - started_at) FROM microingest.batches "
            "WHERE pipeline = %s ORDER BY committed_at DESC LIMIT 1",
            (pipeline.name,),
        )
        latest = cur.fetchone()
    print("\n=== outcome ===")
    print(f"rows in {pipeline.target_table}: {rows} ({distinct} distinct source positions)")
    print(f"batches committed: {batches} ({written} rows in all, last at {last})")
    if latest:
        print(f"last batch: {latest[0]} rows, {latest[1]:.1f}s from Spark start to commit")
    print("\nlag (as `microingest lag` shows it; the Airflow UI has it under Browse > Pipeline lag):")
    print("\n".join(status_lines(pipeline_status(pipeline, systems=systems))))
    user, password = credentials()  # someone ran the demo to look around: show them the way in
    print(f"\nAirflow UI: {base_url()}/dags/{pipeline.dag_id}  (login: {user} / {password})")


def main() -> int:
    pipeline = get_pipeline(PIPELINE)
    systems = PipelineSystems.of(pipeline)
    kafka = systems.kafka_client
    [topic] = pipeline.topics  # each demo pipeline reads one topic
    if create_topic(kafka, topic, PARTITIONS):
        print(f"created topic {topic} with {PARTITIONS} partitions")
    started = time.time()
    produced = len(produce(kafka, topic, sample_events(EVENTS, seed=time.time_ns())))
    _, latest = partition_bounds(kafka, topic)
    print(
        f"produced {produced} events in {time.time() - started:.1f}s; topic now holds {sum(latest.values())} "
        f"offsets across {len(latest)} partitions"
    )
    api = AirflowClient()
    for dag_id in (pipeline.dag_id, SUMMARY_DAG):
        api.wait_for_dag(dag_id, say=lambda m: print(f"  {m}", flush=True))
    api.unpause(SUMMARY_DAG)  # scheduled on the demo target's Asset: each announced batch starts it
    started = time.time()
    runs = run_dag(api, pipeline.dag_id)
    print(f"DAG runs finished in {time.time() - started:.1f}s:")
    for r in runs:
        print(f"  {r.run_id} ({r.run_type}): {r.state}; note: {api.note(pipeline.dag_id, r.run_id)}")
    report(pipeline, systems)
    summarized = summary(api, pipeline.dag_id, runs, systems)
    ordered = orders_demo(api)
    return 0 if all(r.state == "success" for r in runs) and summarized and ordered else 1


def orders_demo(api: AirflowClient) -> bool:
    """The second example: sample orders through the `orders` pipeline, and what landed of them."""
    pipeline = get_pipeline(demo_orders.PIPELINE)
    systems = PipelineSystems.of(pipeline)
    [topic] = pipeline.topics
    if create_topic(systems.kafka_client, topic, PARTITIONS):
        print(f"\ncreated topic {topic} with {PARTITIONS} partitions")
    orders = demo_orders.sample_orders(ORDERS, seed=time.time_ns())
    produce(systems.kafka_client, topic, [demo_orders.as_record(o) for o in orders])
    print(f"\nproduced {len(orders)} orders (totals {sum(o['total'] for o in orders)} EUR in all)")
    api.wait_for_dag(pipeline.dag_id, say=lambda m: print(f"  {m}", flush=True))
    runs = run_dag(api, pipeline.dag_id)
    ids = [o["order_id"] for o in orders]
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL("SELECT count(*), sum(total) FROM {} WHERE order_id = ANY(%s::uuid[])").format(
                table_identifier(pipeline.target_table)
            ),
            (ids,),
        )
        count, total = cur.fetchone()
        cur.execute(
            sql.SQL(
                "SELECT tableoid::regclass::text, count(*) FROM {} WHERE order_id = ANY(%s::uuid[]) "
                "GROUP BY 1 ORDER BY 1"
            ).format(table_identifier(pipeline.target_table)),
            (ids,),
        )
        partitions = cur.fetchall()
        cur.execute(
            sql.SQL(
                "SELECT order_id, total, customer_id, skus, item_prices, attributes::text, trace_id FROM {} "
                "WHERE order_id = %s::uuid"
            ).format(table_identifier(pipeline.target_table)),
            (ids[0],),
        )
        sample = cur.fetchone()
    print(f"\n=== orders ===\nrows in {pipeline.target_table} for them: {count}, totals {total} EUR in all")
    print("by partition: " + ", ".join(f"{name} {n}" for name, n in partitions))
    print(f"one of them: {sample}")
    return all(r.state == "success" for r in runs) and count == len(orders)


def summary(
    api: AirflowClient, dag_id: str, runs: list[DagRun], systems: PipelineSystems, timeout: float = 300
) -> bool:
    """Wait for the downstream runs the runs' Asset events started; print what they summarised."""
    deadline = time.time() + timeout
    events = [e for r in runs for e in api.wait_for_downstream(dag_id, r.run_id, timeout)]
    if not events:
        print(f"\nno batch announced, so no {SUMMARY_DAG} run")
        return True
    for event in events:
        for created in event["created_dagruns"]:
            run = api.wait_for_run(SUMMARY_DAG, created["run_id"], timeout=max(deadline - time.time(), 30))
            print(
                f"\n{SUMMARY_DAG} run {run.run_id}: {run.state} (event extra: {len(event['extra']['batch_ids'])} "
                f"batch(es), {event['extra']['rows_written']:,} rows)"
            )
            if run.state != "success":
                return False
        if not event["created_dagruns"]:
            print(f"no {SUMMARY_DAG} run started within {timeout:.0f}s of the event")
            return False
    batch_ids = [b for e in events for b in e["extra"]["batch_ids"]]
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT event_type, sum(events), round(sum(amount)::numeric, 2) FROM public.demo_events_summary "
            "WHERE batch_id = ANY(%s::uuid[]) GROUP BY 1 ORDER BY 1",
            (batch_ids,),
        )
        for event_type, n, amount in cur.fetchall():
            print(f"  {event_type:<12} {n:>8,} events  amount {amount}")
    return True


if __name__ == "__main__":
    sys.exit(main())
