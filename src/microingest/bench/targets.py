"""One target table per contender in schema `bench`, all shaped alike: the platform's append layout for the bench
schema (source position as primary key), so the COPY limit loads into exactly what the platform writes."""

from __future__ import annotations

from typing import Any

from psycopg2 import sql

from microingest.bench.dataset import EVENT_TIME_MS, SCHEMA
from microingest.commit.table_shape import FIELD_TYPES
from microingest.systems.postgres import connection

SCHEMA_NAME = "bench"


def table_name(contender: str) -> str:
    return f"{SCHEMA_NAME}.{contender}"


def create_targets(pg: dict[str, Any], contenders: list[str]) -> None:
    """Fresh, empty tables (a previous bench run's are dropped)."""
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


def landed(pg: dict[str, Any], contender: str, partitions: int) -> tuple[int, int, int]:
    """(rows, distinct source positions, rows whose event_time is not record i's) in a contender's target: the
    records read, twice, and 0 when exactly once and exact. Record i is at partition i % partitions, offset
    i // partitions (`dataset`), its event_time EVENT_TIME_MS + i however the value spelled it."""
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "SELECT count(*), count(DISTINCT (source_partition, source_offset)), count(*) FILTER (WHERE "
                "event_time IS DISTINCT FROM timestamptz 'epoch' + (%s + source_offset * %s + source_partition) "
                "* interval '1 millisecond') FROM {}"
            ).format(sql.Identifier(SCHEMA_NAME, contender)),
            (EVENT_TIME_MS, partitions),
        )
        return cur.fetchone()
