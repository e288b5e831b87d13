"""The shipped `orders` example (pipelines/orders.yaml) through the running Airflow, as `make demo` runs it: sample
orders with money, a nested customer, arrays, JSON attributes and a trace id header land once each with exactly their
values, each in its day's partition."""

import random
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import yaml
from psycopg2 import sql

from helpers.demo_rows import ORDER_COLUMNS, expected_order
from helpers.pipeline_env import SERVED_FOLDER, Env
from microingest.cli.demo_orders import as_record, sample_orders
from microingest.declare.files import load_pipeline_file
from microingest.systems.kafka_access import create_topic, produce

REPO = Path(__file__).resolve().parents[3]


def test_the_orders_example_lands_every_order_exactly_in_its_days_partition(api, pg, kafka, served):
    declaration = yaml.safe_load((REPO / "pipelines" / "orders.yaml").read_text())
    path = Path(SERVED_FOLDER) / "orders.yaml"
    create_topic(kafka, declaration["topic"], 3)
    path.write_text(yaml.safe_dump(declaration))
    env = Env(load_pipeline_file(path), pg, kafka, Path(SERVED_FOLDER))
    api.wait_for_dag(env.pipeline.dag_id, timeout=240, say=lambda m: None)
    api.unpause(env.pipeline.dag_id)

    # Orders of their own: the shipped pipeline's topic and table outlive a run of the suite on a running platform, and
    # the same seed would give the same order ids placed at other times.
    seed = random.randrange(2**31)
    orders = sample_orders(300, seed=seed)
    produce(kafka, env.topic, [as_record(o) for o in orders])
    run = api.wait_for_run(env.pipeline.dag_id, api.trigger(env.pipeline.dag_id, {}), timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})

    rows = env.query(
        sql.SQL(
            f"SELECT {ORDER_COLUMNS}, tableoid::regclass::text FROM {{}} WHERE order_id = ANY(%s::uuid[]) "
            "ORDER BY order_id"
        ).format(env.table),
        ([o["order_id"] for o in orders],),
    )
    expected = sorted((*expected_order(o), f"orders_p{datetime.fromisoformat(o['placed_at']):%Y%m%d}") for o in orders)
    assert rows == expected, f"seed {seed}"
    assert sum(r[2] for r in rows) == sum((o["total"] for o in orders), Decimal(0))
