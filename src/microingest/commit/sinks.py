"""Sinks: how a batch's decoded rows become target rows, inside the commit transaction.

A live batch of an append target is COPYed straight into it (`target_columns`). Every other batch is staged first,
in the same shape whatever the sink (the source position, the record key, a tombstone flag and the declared value
columns), into tables its transaction makes and drops (`create_staging`), and published from there by the sink's
statement:

- append:         one target row per record; the target's key on the source position rejects any duplicate (a
                  backfill, whose overlap policy looks at the staged positions first).
- upsert_latest:  one target row per record key holding its newest record (offset order within a partition, the
                  key's clock across partitions: `_newer`); a tombstone deletes the key's row and is remembered, so
                  an older record (a replay, a late batch) neither overwrites a newer row nor brings a deleted key
                  back.
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
    """SQL: is the record version of alias `a` newer than that of `b`? Each has the source position and a `clock`.

    Within a partition of one topic the offset decides: Kafka's own order, kept by a record redriven or backfilled
    late too. Otherwise the clock decides, ties broken by topic, partition then offset. A key's clock is the latest
    Kafka timestamp among its records in its partition up to each one, so it never goes backwards within a
    partition (its CreateTime may, with several producers): the two rules agree, the order is total, and a key ends
    on the same row whatever order its records came in and however batches were cut."""
    return sql.SQL(
        "(CASE WHEN ({a}.source_topic, {a}.source_partition) = ({b}.source_topic, {b}.source_partition) "
        "THEN {a}.source_offset > {b}.source_offset "
        "ELSE ({a}.clock, {a}.source_topic, {a}.source_partition, {a}.source_offset) "
        "> ({b}.clock, {b}.source_topic, {b}.source_partition, {b}.source_offset) END)"
    ).format(a=sql.Identifier(a), b=sql.Identifier(b))


def _seed(stored: str) -> sql.Composable:
    """SQL: the clock of the key's stored version (alias `stored`) when it comes earlier in staged record s's
    partition: where s's clock goes on from."""
    return sql.SQL(
        "CASE WHEN ({v}.source_topic, {v}.source_partition) = (s.source_topic, s.source_partition) "
        "AND {v}.source_offset < s.source_offset THEN {v}.clock END"
    ).format(v=sql.Identifier(stored))


class UpsertLatestSink(Sink):
    mode = "upsert_latest"
    TOMBSTONES = sql.Identifier("microingest", "upsert_tombstones")
    CLOCKS = sql.Identifier("microingest", "upsert_clocks")
    LATEST = sql.Identifier("microingest_latest")
    _VERSION = ("source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id", "clock")
    _WINS = sql.SQL("l.beats_row AND l.beats_memo")

    def target_columns(self) -> tuple[str, ...]:
        return ("record_key",) + SOURCE_COLUMNS + self.pipeline.value_columns

    def _weigh(self, cur, batch_id: str) -> None:
        """Into LATEST: each key's newest staged record with its clock, and whether it is newer than the key's row
        and than its remembered tombstone, as they stood before the batch (by `_newer`)."""
        cur.execute(
            sql.SQL(
                "CREATE TEMP TABLE {latest} ON COMMIT DROP AS WITH "
                "s AS (SELECT *, max(coalesce(kafka_timestamp, '-infinity')) OVER (PARTITION BY record_key, "
                "source_topic, source_partition ORDER BY source_offset) AS own_clock FROM {staging} "
                "WHERE batch_id = %(batch)s), "
                "r AS (SELECT t.record_key, t.source_topic, t.source_partition, t.source_offset, "
                "coalesce(c.clock, t.kafka_timestamp, '-infinity') AS clock FROM {target} t LEFT JOIN {clocks} c "
                "ON c.pipeline = %(pipeline)s AND c.record_key = t.record_key "
                "WHERE t.record_key IN (SELECT record_key FROM s)), "
                "m AS (SELECT record_key, source_topic, source_partition, source_offset, "
                "coalesce(clock, kafka_timestamp, '-infinity') AS clock FROM {memo} "
                "WHERE pipeline = %(pipeline)s AND record_key IN (SELECT record_key FROM s)), "
                "c AS (SELECT s.*, greatest(s.own_clock, {seed_r}, {seed_m}) AS clock FROM s "
                "LEFT JOIN r USING (record_key) LEFT JOIN m USING (record_key)), "
                "l AS (SELECT DISTINCT ON (record_key) * FROM c "
                "ORDER BY record_key, clock DESC, source_topic DESC, source_partition DESC, source_offset DESC) "
                "SELECT l.*, (r.record_key IS NULL OR {newer_r}) AS beats_row, "
                "(m.record_key IS NULL OR {newer_m}) AS beats_memo "
                "FROM l LEFT JOIN r USING (record_key) LEFT JOIN m USING (record_key)"
            ).format(
                latest=self.LATEST,
                staging=self.staging,
                target=self.target,
                clocks=self.CLOCKS,
                memo=self.TOMBSTONES,
                seed_r=_seed("r"),
                seed_m=_seed("m"),
                newer_r=_newer("l", "r"),
                newer_m=_newer("l", "m"),
            ),
            {"batch": batch_id, "pipeline": self.pipeline.name},
        )

    def publish(self, cur, batch_id: str) -> int:
        """Never overwrite a key's row with an older record, nor bring back a key that a newer tombstone deleted:
        live batches, retries and backfill replays all converge on each key's newest record."""
        name, latest, wins = self.pipeline.name, self.LATEST, self._WINS
        self._weigh(cur, batch_id)
        cur.execute(
            sql.SQL("DELETE FROM {} t USING {} l WHERE l.is_tombstone AND {} AND t.record_key = l.record_key").format(
                self.target, latest, wins
            )
        )
        deleted = cur.rowcount
        # Remember the winning tombstones (of keys deleted now or absent already) so older records stay out.
        version = identifier_list(self._VERSION)
        cur.execute(
            sql.SQL(
                "INSERT INTO {memo} (pipeline, record_key, {version}) SELECT %s, record_key, {version} FROM {latest} l "
                "WHERE l.is_tombstone AND {wins} ON CONFLICT (pipeline, record_key) DO UPDATE SET {updates}"
            ).format(
                memo=self.TOMBSTONES,
                version=version,
                latest=latest,
                wins=wins,
                updates=sql.SQL(", ").join(
                    sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in self._VERSION
                ),
            ),
            (name,),
        )
        cols = self.target_columns()
        updates = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in cols if c != "record_key"
        )
        cur.execute(
            sql.SQL(
                "INSERT INTO {target} ({cols}) SELECT {cols} FROM {latest} l WHERE NOT l.is_tombstone AND {wins} "
                "ON CONFLICT (record_key) DO UPDATE SET {updates}"
            ).format(target=self.target, cols=identifier_list(cols), latest=latest, wins=wins, updates=updates),
        )
        written = cur.rowcount
        # A newer value brought the key back: its tombstone no longer decides anything. A row's clock is kept
        # apart only where it is not the row's own Kafka timestamp.
        cur.execute(
            sql.SQL(
                "DELETE FROM {} m USING {} l WHERE m.pipeline = %s AND m.record_key = l.record_key AND NOT "
                "l.is_tombstone AND {}"
            ).format(self.TOMBSTONES, latest, wins),
            (name,),
        )
        cur.execute(
            sql.SQL("DELETE FROM {} c USING {} l WHERE c.pipeline = %s AND c.record_key = l.record_key AND {}").format(
                self.CLOCKS, latest, wins
            ),
            (name,),
        )
        cur.execute(
            sql.SQL(
                "INSERT INTO {} (pipeline, record_key, clock) SELECT %s, record_key, clock FROM {} l WHERE NOT "
                "l.is_tombstone AND {} AND l.clock > coalesce(l.kafka_timestamp, '-infinity')"
            ).format(self.CLOCKS, latest, wins),
            (name,),
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
