"""Sinks: how a batch's staged rows become target rows, inside the commit transaction.

All sinks stage the same shape into a per-pipeline table in schema microingest_staging: the source position, the
record key, a tombstone flag and the declared value columns. They differ in the statement that publishes a batch:

- append:         one target row per record; the target's key on the source position rejects any duplicate.
- upsert_latest:  one target row per record key holding the latest value; within a batch the record with the highest
                  offset wins; a tombstone deletes the key's row. A row written from a later offset of the same
                  partition is never overwritten by an earlier one.
- aggregate:      counts and sums per group (and time bucket) added onto the target's existing rows — not idempotent,
                  so any record published twice shows up as a wrong total.
"""

from __future__ import annotations

from psycopg2 import sql

from microingest.codec import PG_TYPES
from microingest.declarations import SOURCE_COLUMNS, Pipeline
from microingest.identifiers import split_table_name

STAGING_SCHEMA = "microingest_staging"
_STAGING_TYPES = {"source_topic": "text", "source_partition": "integer", "source_offset": "bigint",
                  "kafka_timestamp": "timestamptz", "batch_id": "uuid", "record_key": "text", "is_tombstone": "boolean"}
STAGING_PREFIX = tuple(_STAGING_TYPES)  # the row layout RecordProcessor output is appended to


class TargetError(RuntimeError):
    pass


def _ids(names) -> sql.Composed:
    return sql.SQL(", ").join(map(sql.Identifier, names))


class Sink:
    mode = ""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.target = sql.Identifier(*split_table_name(pipeline.target_table))
        self.staging = sql.Identifier(STAGING_SCHEMA, pipeline.name)
        self.staging_columns = STAGING_PREFIX + pipeline.value_columns

    def target_columns(self) -> tuple[str, ...]:
        raise NotImplementedError

    def publish(self, cur, batch_id: str) -> int:
        """Move the batch's staged rows into the target; returns the number of target rows written."""
        raise NotImplementedError

    def staging_types(self) -> list[tuple[str, str]]:
        types = {**_STAGING_TYPES, **{f.name: PG_TYPES[f.type] for f in self.pipeline.schema}}
        return [(c, types[c]) for c in self.staging_columns]

    def ensure_staging(self, cur) -> None:
        """Create the staging table, or recreate it when the declaration's columns changed since it was made."""
        cur.execute("SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
                    "ORDER BY ordinal_position", (STAGING_SCHEMA, self.pipeline.name))
        existing = tuple(r[0] for r in cur.fetchall())
        if existing and existing != self.staging_columns:
            cur.execute(sql.SQL("DROP TABLE {}").format(self.staging))
        cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in self.staging_types())
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
        missing = [c for c in self.target_columns() if c not in present]
        if missing:
            raise TargetError(f"target table {schema}.{table} lacks columns {', '.join(missing)} needed by sink mode "
                              f"{self.mode}")


class AppendSink(Sink):
    mode = "append"

    def target_columns(self) -> tuple[str, ...]:
        return SOURCE_COLUMNS + self.pipeline.value_columns

    def publish(self, cur, batch_id: str) -> int:
        cols = _ids(self.target_columns())
        cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE batch_id = %s ORDER BY source_partition, "
                            "source_offset").format(self.target, cols, cols, self.staging), (batch_id,))
        return cur.rowcount


class UpsertLatestSink(Sink):
    mode = "upsert_latest"

    def target_columns(self) -> tuple[str, ...]:
        return ("record_key",) + SOURCE_COLUMNS + self.pipeline.value_columns

    def publish(self, cur, batch_id: str) -> int:
        cols = self.target_columns()
        newer = sql.SQL("(t.source_partition <> l.source_partition OR t.source_offset < l.source_offset)")
        latest = sql.SQL("SELECT DISTINCT ON (record_key) * FROM {} WHERE batch_id = %s "
                         "ORDER BY record_key, source_offset DESC, source_partition DESC").format(self.staging)
        cur.execute(sql.SQL("WITH l AS ({}) DELETE FROM {} t USING l WHERE l.is_tombstone AND t.record_key = "
                            "l.record_key AND {}").format(latest, self.target, newer), (batch_id,))
        deleted = cur.rowcount
        updates = sql.SQL(", ").join(sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c))
                                     for c in cols if c != "record_key")
        newer_excluded = sql.SQL("(t.source_partition <> EXCLUDED.source_partition "
                                 "OR t.source_offset < EXCLUDED.source_offset)")
        cur.execute(sql.SQL("WITH l AS ({}) INSERT INTO {} AS t ({}) SELECT {} FROM l WHERE NOT l.is_tombstone "
                            "ON CONFLICT (record_key) DO UPDATE SET {} WHERE {}").format(
            latest, self.target, _ids(cols), _ids(cols), updates, newer_excluded), (batch_id,))
        return deleted + cur.rowcount


class AggregateSink(Sink):
    mode = "aggregate"

    def __init__(self, pipeline: Pipeline):
        super().__init__(pipeline)
        self.spec = pipeline.aggregate

    def target_columns(self) -> tuple[str, ...]:
        return self.spec.key_columns + tuple(m.name for m in self.spec.measures)

    def publish(self, cur, batch_id: str) -> int:
        spec = self.spec
        keys = [sql.Identifier(g) for g in spec.group_by]
        if spec.bucket_field:
            keys.append(sql.SQL("date_bin({}::interval, {}, TIMESTAMPTZ '2000-01-01 00:00:00+00')").format(
                sql.Literal(spec.bucket_width), sql.Identifier(spec.bucket_field)))
        measures = [sql.SQL("count(*)") if m.function == "count"
                    else sql.SQL("coalesce(sum({}), 0)").format(sql.Identifier(m.field)) for m in spec.measures]
        adds = sql.SQL(", ").join(sql.SQL("{} = t.{} + EXCLUDED.{}").format(*[sql.Identifier(m.name)] * 3)
                                  for m in spec.measures)
        cur.execute(sql.SQL("INSERT INTO {} AS t ({}) SELECT {}, {} FROM {} WHERE batch_id = %s GROUP BY {} "
                            "ON CONFLICT ({}) DO UPDATE SET {}").format(
            self.target, _ids(self.target_columns()), sql.SQL(", ").join(keys), sql.SQL(", ").join(measures),
            self.staging, sql.SQL(", ").join(sql.Literal(i + 1) for i in range(len(keys))),
            _ids(spec.key_columns), adds), (batch_id,))
        return cur.rowcount


SINKS = {s.mode: s for s in (AppendSink, UpsertLatestSink, AggregateSink)}


def sink_for(pipeline: Pipeline) -> Sink:
    return SINKS[pipeline.sink_mode](pipeline)
