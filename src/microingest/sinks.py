"""Sinks: how a batch's staged rows become target rows, inside the commit transaction.

Every sink stages the same shape (source position + declared value columns + batch id) into a per-pipeline table in
schema microingest_staging; sinks differ only in the statement that publishes staged rows into the target.
"""

from __future__ import annotations

from psycopg2 import sql

from microingest.codec import PG_TYPES
from microingest.declarations import Pipeline
from microingest.identifiers import split_table_name

STAGING_SCHEMA = "microingest_staging"
_SOURCE_TYPES = {"source_topic": "text", "source_partition": "integer", "source_offset": "bigint",
                 "kafka_timestamp": "timestamptz", "batch_id": "uuid"}


class TargetError(RuntimeError):
    pass


class AppendSink:
    """One target row per record; the target's key on the source position rejects any duplicate."""

    mode = "append"

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.target = sql.Identifier(*split_table_name(pipeline.target_table))
        self.staging = sql.Identifier(STAGING_SCHEMA, pipeline.name)
        self.columns = pipeline.target_columns

    def column_types(self) -> list[tuple[str, str]]:
        types = dict(_SOURCE_TYPES)
        types.update({f.name: PG_TYPES[f.type] for f in self.pipeline.schema})
        return [(c, types[c]) for c in self.columns]

    def ensure_staging(self, cur) -> None:
        cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in self.column_types())
        cur.execute(sql.SQL("CREATE UNLOGGED TABLE IF NOT EXISTS {} ({})").format(self.staging, cols))
        # Task retries and speculative copies may stage the same record twice; the index makes that harmless.
        cur.execute(sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} (batch_id, source_topic, source_partition, "
                            "source_offset)").format(sql.Identifier(f"{self.pipeline.name}_position"), self.staging))

    def check_target(self, cur) -> None:
        schema, table = split_table_name(self.pipeline.target_table)
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                    (schema, table))
        present = {r[0] for r in cur.fetchall()}
        if not present:
            raise TargetError(f"target table {schema}.{table} does not exist; create it (see sql/) before ingesting")
        missing = [c for c in self.columns if c not in present]
        if missing:
            raise TargetError(f"target table {schema}.{table} lacks columns {', '.join(missing)}")

    def stage_from(self, cur, source: sql.Identifier) -> int:
        cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT DO NOTHING").format(
            self.staging, self._column_list(), self._column_list(), source))
        return cur.rowcount

    def publish(self, cur, batch_id: str) -> int:
        cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE batch_id = %s ORDER BY source_partition, "
                            "source_offset").format(self.target, self._column_list(), self._column_list(), self.staging),
                    (batch_id,))
        return cur.rowcount

    def _column_list(self) -> sql.Composed:
        return sql.SQL(", ").join(map(sql.Identifier, self.columns))


def sink_for(pipeline: Pipeline) -> AppendSink:
    sinks = {AppendSink.mode: AppendSink}
    return sinks[pipeline.sink_mode](pipeline)
