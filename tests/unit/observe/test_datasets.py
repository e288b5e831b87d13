import json

from microingest.observe.datasets import TableName, topic_dataset
from microingest.systems.connections import parse_connection

PG = parse_connection("pg", "postgresql://ingest:s3cret@db.example:5433/warehouse?sslmode=require")
KAFKA = parse_connection(
    "k",
    json.dumps(
        {
            "conn_type": "kafka",
            "extra": {"bootstrap.servers": "b1.example:9093,b2.example:9093", "sasl.password": "s3cret"},
        }
    ),
)


def test_the_target_is_named_by_host_port_database_schema_and_table_without_credentials():
    table = TableName.of(PG, "sales.orders")
    assert table.asset_uri == "postgres://db.example:5433/warehouse/sales/orders"
    assert (table.dataset.namespace, table.dataset.name) == ("postgres://db.example:5433", "warehouse.sales.orders")
    assert TableName.of(PG, "orders").dataset.name == "warehouse.public.orders"
    assert "s3cret" not in repr(table) and "ingest" not in table.asset_uri


def test_the_topic_is_named_by_the_first_bootstrap_server():
    dataset = topic_dataset(KAFKA, "orders-v1")
    assert (dataset.namespace, dataset.name) == ("kafka://b1.example:9093", "orders-v1")
