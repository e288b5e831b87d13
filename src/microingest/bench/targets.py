"""One target table per contender in schema `bench`: the platform's append layout (source position as primary key) of
the events' schema, so the COPY limit loads into exactly what the platform writes, or of the orders' (made as
`microingest migrate` makes a declaration's table). Each is checked for what it holds: its rows, their positions, the
time record i was given, and every value against what the records were made of (the COPY limit's table for the
events, `ORDERS_EXPECTED` for the orders)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from psycopg2 import sql

from microingest.bench.dataset import COPY_BATCH_ID, EVENT_TIME_MS, SCHEMA, Dataset, is_malformed
from microingest.bench.kafka_loop import ORDER_COLUMNS
from microingest.bench.orders_dataset import expected_row, orders_declaration
from microingest.commit.table_shape import FIELD_TYPES
from microingest.commit.target_tables import prepare_targets
from microingest.declare.validate import parse_pipeline
from microingest.decode.codec import copy_text_row
from microingest.systems.postgres import connection

SCHEMA_NAME = "bench"


def table_name(contender: str) -> str:
    return f"{SCHEMA_NAME}.{contender}"


ORDERS_EXPECTED = "orders_expected"  # the orders' values as they were made, loaded from `orders_dataset.expected_row`


def create_targets(pg: dict[str, Any], contenders: list[str], orders: list[str]) -> None:
    """Fresh, empty tables (a previous bench run's are dropped): the events' shape for `contenders`, the orders' for
    `orders`."""
    values = [
        sql.SQL("{} {}").format(
            sql.Identifier(name), sql.SQL(FIELD_TYPES[spec if isinstance(spec, str) else spec["type"]])
        )
        for name, spec in SCHEMA.items()
    ]
    with connection(pg) as conn, conn, conn.cursor() as cur:
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA_NAME)))
        for contender in contenders:
            table = sql.Identifier(SCHEMA_NAME, contender)
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
            cur.execute(
                sql.SQL(
                    "CREATE TABLE {} (source_topic text NOT NULL, source_partition integer NOT NULL, "
                    "source_offset bigint NOT NULL, kafka_timestamp timestamptz, batch_id uuid NOT NULL, {}, "
                    "ingested_at timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (source_topic, source_partition, source_offset))"
                ).format(table, sql.SQL(", ").join(values))
            )
        for contender in orders:
            cur.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(SCHEMA_NAME, contender)))
    for key in orders:
        declared = orders_declaration({"name": f"bench_{key}", "topic": "bench", "target_table": table_name(key)})
        for result in prepare_targets([parse_pipeline(declared)], "make bench"):
            if isinstance(result, Exception):
                raise result


def load_expected_orders(pg: dict[str, Any], dataset: Dataset, chunk: int = 50_000) -> None:
    """`ORDERS_EXPECTED` holds each well-formed order of the dataset's large run, from its values, not decoded;
    loaded `chunk` records at a time, so the bench's own memory stays small."""
    columns = ", ".join(
        ("source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id", *ORDER_COLUMNS)
    )
    with connection(pg) as conn, conn, conn.cursor() as cur:
        for start in range(0, dataset.records, chunk):
            out = io.StringIO()
            for i in range(start, min(start + chunk, dataset.records)):
                if not is_malformed(i, dataset.malformed_share):
                    head = (dataset.topic, i % dataset.partitions, i // dataset.partitions, None, COPY_BATCH_ID)
                    out.write(copy_text_row(head + expected_row(i)))
            out.seek(0)
            cur.copy_expert(f"COPY {table_name(ORDERS_EXPECTED)} ({columns}) FROM STDIN", out)


def wrong_values(pg: dict[str, Any], contender: str, expected: str, columns: Sequence[str]) -> int:
    """Rows of a contender whose values differ from those `expected` holds at the same source position (a row it
    lacks is for the counts to find)."""
    values = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "SELECT count(*) FROM (SELECT source_partition, source_offset, {values} FROM {table} INTERSECT ALL "
                "SELECT source_partition, source_offset, {values} FROM {expected}) same"
            ).format(
                values=values,
                table=sql.Identifier(SCHEMA_NAME, contender),
                expected=sql.Identifier(SCHEMA_NAME, expected),
            )
        )
        same = cur.fetchone()[0]
        cur.execute(
            sql.SQL("SELECT count(*) FROM {table} t JOIN {expected} e USING (source_partition, source_offset)").format(
                table=sql.Identifier(SCHEMA_NAME, contender), expected=sql.Identifier(SCHEMA_NAME, expected)
            )
        )
        return cur.fetchone()[0] - same


def landed(
    pg: dict[str, Any], contender: str, partitions: int, time_column: str = "event_time"
) -> tuple[int, int, int]:
    """(rows, distinct source positions, rows whose time is not record i's) in a contender's target: the records
    read, twice, and 0 when exactly once and exact. Record i is at partition i % partitions, offset i // partitions
    (`dataset`), its time (`time_column`) EVENT_TIME_MS + i however the value spelled it."""
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "SELECT count(*), count(DISTINCT (source_partition, source_offset)), count(*) FILTER (WHERE "
                "{} IS DISTINCT FROM timestamptz 'epoch' + (%s + source_offset * %s + source_partition) "
                "* interval '1 millisecond') FROM {}"
            ).format(sql.Identifier(time_column), sql.Identifier(SCHEMA_NAME, contender)),
            (EVENT_TIME_MS, partitions),
        )
        return cur.fetchone()
