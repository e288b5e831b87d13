"""Sinks: how a batch's decoded rows become target rows, inside the commit transaction.

A live batch of an append target is COPYed straight into it (`target_columns`). Every other batch is staged first,
in the same shape whatever the sink (the source position, the record key, a tombstone flag and the declared value
columns), into tables its transaction makes and drops (`create_staging`), and published from there by the sink's
statement:

- append:         one target row per record; the target's key on the source position rejects any duplicate (a
                  backfill, whose overlap policy looks at the staged positions first).
- upsert_latest:  one target row per record key holding its newest record (offset order within a partition, Kafka
                  timestamp across partitions); a tombstone deletes the key's row and is remembered, so an older
                  record (a replay, a late batch) neither overwrites a newer row nor brings a deleted key back.
- aggregate:      counts and sums per group (and time bucket) added onto the target's existing rows — not idempotent,
                  so any record published twice shows up as a wrong total.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg2 import sql

from microingest.batches import DEAD_LETTER_TYPES, ROW_COLUMNS, ROW_LAYOUT, SOURCE_COLUMNS
from microingest.commit.table_shape import pg_type
from microingest.declare.identifiers import identifier_list, table_identifier
from microingest.declare.pipeline import Pipeline

# error_class of the dead letters an operator's skip writes: records never ingested, which a backfill may resolve.
SKIPPED = "skipped"
STAGED_ROWS, STAGED_DEAD = sql.Identifier("microingest_staged_rows"), sql.Identifier("microingest_staged_dead")


@dataclass(frozen=True)
class StagedCounts:
    """A batch's decoded records: rows for the target, dead letters, and those a pipeline's transform_sql filtered
    out (counted, never written)."""

    rows: int
    dead: int
    filtered: int = 0

    @property
    def written(self) -> int:
        """The rows and dead letters: what the commit COPYs."""
        return self.rows + self.dead

    @property
    def records(self) -> int:
        return self.rows + self.dead + self.filtered


class Sink:
    mode = ""

    def __init__(self, pipeline: Pipeline):
        self.pipeline = pipeline
        self.target = table_identifier(pipeline.target_table)
        self.staging, self.staged_dead = STAGED_ROWS, STAGED_DEAD
        self.staging_columns = ROW_COLUMNS + pipeline.value_columns

    def target_columns(self) -> tuple[str, ...]:
        raise NotImplementedError

    def publish(self, cur, batch_id: str) -> int:
        """Move the batch's staged rows into the target; returns the number of target rows written."""
        raise NotImplementedError

    def staging_types(self) -> list[tuple[str, str]]:
        types = {**{c.name: c.pg_type for c in ROW_LAYOUT}, **{f.name: pg_type(f) for f in self.pipeline.schema}}
        return [(c, types[c]) for c in self.staging_columns]

    def create_staging(self, cur) -> None:
        """Inside the commit: the two tables a merge reads the batch from, dropped when the transaction ends (written
        once, without WAL, never seen by another session)."""
        for table, types in ((self.staging, self.staging_types()), (self.staged_dead, DEAD_LETTER_TYPES.items())):
            cols = sql.SQL(", ").join(sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in types)
            cur.execute(sql.SQL("CREATE TEMP TABLE {} ({}) ON COMMIT DROP").format(table, cols))


class AppendSink(Sink):
    mode = "append"

    def target_columns(self) -> tuple[str, ...]:
        return SOURCE_COLUMNS + self.pipeline.value_columns

    def publish(self, cur, batch_id: str) -> int:
        cols = identifier_list(self.target_columns())
        # No ORDER BY: a sort of the whole batch buys nothing, rows are found by their key.
        cur.execute(
            sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} WHERE batch_id = %s").format(
                self.target, cols, cols, self.staging
            ),
            (batch_id,),
        )
        return cur.rowcount


def _newer(a: str, b: str) -> sql.Composable:
    """SQL: is the record version (source position, Kafka timestamp) of alias `a` newer than that of `b`?

    Within a partition of one topic the offset decides: Kafka's own order. Across partitions or topics (a key whose
    producer or partition count changed, or that several topics carry) the Kafka timestamp decides, ties broken by
    topic, partition then offset, so every writer, replay or not, ends on the same row."""
    return sql.SQL(
        "(CASE WHEN ({a}.source_topic, {a}.source_partition) = ({b}.source_topic, {b}.source_partition) "
        "THEN {a}.source_offset > {b}.source_offset "
        "ELSE (coalesce({a}.kafka_timestamp, '-infinity'), {a}.source_topic, {a}.source_partition, {a}.source_offset) "
        "> (coalesce({b}.kafka_timestamp, '-infinity'), {b}.source_topic, {b}.source_partition, {b}.source_offset) "
        "END)"
    ).format(a=sql.Identifier(a), b=sql.Identifier(b))


class UpsertLatestSink(Sink):
    mode = "upsert_latest"
    TOMBSTONES = sql.Identifier("microingest", "upsert_tombstones")
    _VERSION = ("record_key", "source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id")

    def target_columns(self) -> tuple[str, ...]:
        return ("record_key",) + SOURCE_COLUMNS + self.pipeline.value_columns

    def _latest(self) -> sql.Composable:
        """Each key's newest staged record of the batch (by `_newer`: the last offset of each topic's partition
        first)."""
        return sql.SQL(
            "SELECT DISTINCT ON (record_key) * FROM (SELECT DISTINCT ON (record_key, source_topic, source_partition) * "
            "FROM {} WHERE batch_id = %s ORDER BY record_key, source_topic, source_partition, source_offset DESC) p "
            "ORDER BY record_key, coalesce(kafka_timestamp, '-infinity') DESC, source_topic DESC, "
            "source_partition DESC, source_offset DESC"
        ).format(self.staging)

    def publish(self, cur, batch_id: str) -> int:
        """Never overwrite a key's row with an older record, nor bring back a key that a newer tombstone deleted:
        live batches, retries and backfill replays all converge on each key's newest record."""
        name = self.pipeline.name
        latest, version = self._latest(), identifier_list(self._VERSION[1:])
        cur.execute(
            sql.SQL(
                "WITH l AS ({}) DELETE FROM {} t USING l WHERE l.is_tombstone AND t.record_key = l.record_key AND {}"
            ).format(latest, self.target, _newer("l", "t")),
            (batch_id,),
        )
        deleted = cur.rowcount
        # Remember the deleting tombstones (and tombstones of keys already absent) so older records stay out.
        cur.execute(
            sql.SQL(
                "WITH l AS ({latest}) INSERT INTO {memo} AS m (pipeline, record_key, {version}) SELECT %s, record_key, "
                "{version} FROM l WHERE l.is_tombstone AND NOT EXISTS (SELECT 1 FROM {target} t WHERE t.record_key = "
                "l.record_key) ON CONFLICT (pipeline, record_key) DO UPDATE SET {updates} WHERE {newer}"
            ).format(
                latest=latest,
                memo=self.TOMBSTONES,
                version=version,
                target=self.target,
                updates=sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in self._VERSION[1:]
                ),
                newer=_newer("excluded", "m"),
            ),
            (batch_id, name),
        )

        cols = self.target_columns()
        updates = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in cols if c != "record_key"
        )
        cur.execute(
            sql.SQL(
                "WITH l AS ({latest}) INSERT INTO {target} AS t ({cols}) SELECT {cols} FROM l WHERE NOT l.is_tombstone "
                "AND NOT EXISTS (SELECT 1 FROM {memo} m WHERE m.pipeline = %s AND m.record_key = l.record_key AND NOT "
                "{newer_than_memo}) ON CONFLICT (record_key) DO UPDATE SET {updates} WHERE {newer}"
            ).format(
                latest=latest,
                target=self.target,
                cols=identifier_list(cols),
                memo=self.TOMBSTONES,
                newer_than_memo=_newer("l", "m"),
                updates=updates,
                newer=_newer("excluded", "t"),
            ),
            (batch_id, name),
        )
        written = cur.rowcount
        # A newer value brought the key back: its tombstone no longer decides anything.
        cur.execute(
            sql.SQL(
                "WITH l AS ({}) DELETE FROM {} m USING l WHERE m.pipeline = %s AND m.record_key = "
                "l.record_key AND NOT l.is_tombstone AND {}"
            ).format(latest, self.TOMBSTONES, _newer("l", "m")),
            (batch_id, name),
        )
        return deleted + written


class AggregateSink(Sink):
    mode = "aggregate"

    def __init__(self, pipeline: Pipeline):
        super().__init__(pipeline)
        self.spec = pipeline.aggregate_spec

    def target_columns(self) -> tuple[str, ...]:
        return self.spec.key_columns + tuple(m.name for m in self.spec.measures)

    def publish(self, cur, batch_id: str) -> int:
        spec = self.spec
        keys: list[sql.Composable] = [sql.Identifier(g) for g in spec.group_by]
        if spec.bucket_field:
            keys.append(
                sql.SQL("date_bin({}::interval, {}, TIMESTAMPTZ '2000-01-01 00:00:00+00')").format(
                    sql.Literal(spec.bucket_width), sql.Identifier(spec.bucket_field)
                )
            )
        measures = [
            sql.SQL("count(*)")
            if m.function == "count"
            else sql.SQL("coalesce(sum({}), 0)").format(sql.Identifier(m.summed))
            for m in spec.measures
        ]
        adds = sql.SQL(", ").join(
            sql.SQL("{} = t.{} + EXCLUDED.{}").format(*[sql.Identifier(m.name)] * 3) for m in spec.measures
        )
        cur.execute(
            sql.SQL(
                "INSERT INTO {} AS t ({}) SELECT {}, {} FROM {} WHERE batch_id = %s GROUP BY {} "
                "ON CONFLICT ({}) DO UPDATE SET {}"
            ).format(
                self.target,
                identifier_list(self.target_columns()),
                sql.SQL(", ").join(keys),
                sql.SQL(", ").join(measures),
                self.staging,
                sql.SQL(", ").join(sql.Literal(i + 1) for i in range(len(keys))),
                identifier_list(spec.key_columns),
                adds,
            ),
            (batch_id,),
        )
        return cur.rowcount


SINKS = {s.mode: s for s in (AppendSink, UpsertLatestSink, AggregateSink)}


def sink_for(pipeline: Pipeline) -> Sink:
    return SINKS[pipeline.sink_mode](pipeline)
