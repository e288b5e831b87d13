"""Staging: where Spark executors put a batch's rows and dead letters, in parallel, before the commit.

1. The driver opens a `BatchAttempt`: takes a session advisory lock on a fresh batch id, lists the id in
   microingest.staging_batches, and removes the staged rows of earlier attempts whose lock is free (their driver died).
2. Executors `stage_part` in parallel, each Spark partition in its own transaction, into the pipeline's staging table
   (rows, COPYed while they are decoded) and microingest_staging.dead_letters (bad records). A batch that is no longer listed is refused, so a
   straggler of a dead attempt cannot leave rows behind; a re-run task's rows are ignored as already staged.
3. The driver commits the batch (`commit.commit_batch`), which also removes its staging in the same transaction,
   then truncates the staging tables when no other attempt uses them (`release_space`).
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO, Callable, Sequence, TextIO

import psycopg2
from psycopg2 import sql

from microingest.commit.copy_stream import copy_statement, copy_while_producing
from microingest.commit.ledger import LedgerError
from microingest.commit.sinks import STAGING_SCHEMA, sink_for
from microingest.commit.target_tables import check_target
from microingest.declare.pipeline import Pipeline
from microingest.plan.offsets import OffsetRange
from microingest.systems.postgres import advisory_lock, advisory_unlock, connect, connection, try_advisory_lock

log = logging.getLogger(__name__)

DEAD_LETTER_COLUMNS = ("batch_id", "topic", "partition", "offset", "kafka_timestamp", "record_key", "record_value",
                       "headers", "error_class", "error_message")
STAGED_DEAD = sql.Identifier(STAGING_SCHEMA, "dead_letters")
_SPILL_BYTES = 64 * 1024 * 1024  # a partition's dead letters stay in memory up to this size, then spill to disk


def ranges_unnest(ranges: Sequence[OffsetRange]) -> tuple[sql.SQL, tuple[list[str], list[int], list[int], list[int]]]:
    """A set-returning SQL expression yielding one row (topic, partition, from, until) per range, and its parameters.

    The ranges travel as four parallel arrays, one parameter each, so a batch of any number of ranges is a statement
    of one fixed text; the casts give Postgres the element types even when the arrays are empty."""
    return (sql.SQL("unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[])"),
            ([r.topic for r in ranges], [r.partition for r in ranges], [r.from_offset for r in ranges],
             [r.until_offset for r in ranges]))


def delete_staged(cur, staging: sql.Identifier, batch_id: str) -> None:
    cur.execute(sql.SQL("DELETE FROM {} WHERE batch_id = %s").format(staging), (batch_id,))
    cur.execute(sql.SQL("DELETE FROM {} WHERE batch_id = %s").format(STAGED_DEAD), (batch_id,))
    cur.execute("DELETE FROM microingest.staging_batches WHERE batch_id = %s", (batch_id,))


@dataclass(frozen=True)
class StagedCounts:
    """What the executors report having staged: rows for the target, and dead letters."""

    rows: int
    dead: int

    @property
    def records(self) -> int:
        return self.rows + self.dead


@dataclass
class StagedByRange:
    counts: StagedCounts
    per_range: list[int]
    outside: int = 0
    example_outside: str | None = None


class BatchAttempt:
    """Driver-side handle of one batch attempt; see the module docstring for the protocol."""

    def __init__(self, params: dict[str, Any], pipeline: Pipeline):
        self.params = params
        self.pipeline = pipeline
        self.sink = sink_for(pipeline)
        self.batch_id = str(uuid.uuid4())
        self.started_at = datetime.now(timezone.utc)
        self.conn = None

    def open(self) -> "BatchAttempt":
        self.conn = connect(self.params)
        self.conn.autocommit = True
        with self.conn.cursor() as cur:
            check_target(cur, self.pipeline)
            advisory_lock(cur, self.batch_id)
            self._create_staging(cur)
            cur.execute("INSERT INTO microingest.staging_batches (batch_id, pipeline, owner) VALUES (%s, %s, %s)",
                        (self.batch_id, self.pipeline.name, f"{socket.gethostname()}:{os.getpid()}"))
        removed = self.remove_abandoned()
        if removed:
            log.info("removed staging of %d abandoned attempt(s) of pipeline %s: %s", len(removed),
                     self.pipeline.name, ", ".join(removed))
        return self

    def _create_staging(self, cur) -> None:
        # Concurrent first runs would race on CREATE TABLE IF NOT EXISTS; serialise them per pipeline.
        cur.execute("BEGIN")
        advisory_lock(cur, f"microingest:ddl:{self.pipeline.name}", transaction=True)
        self.sink.ensure_staging(cur)
        cur.execute("COMMIT")

    def remove_abandoned(self) -> list[str]:
        """Drop staged rows of attempts whose driver is gone (their session advisory lock is free)."""
        removed = []
        with self.conn.cursor() as cur:
            cur.execute("SELECT batch_id::text FROM microingest.staging_batches WHERE pipeline = %s AND batch_id <> %s",
                        (self.pipeline.name, self.batch_id))
            for (other,) in cur.fetchall():
                if not try_advisory_lock(cur, other):
                    continue  # its driver is alive: a concurrent run, which the fence will sort out
                try:
                    cur.execute("BEGIN")
                    cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR UPDATE", (other,))
                    delete_staged(cur, self.sink.staging, other)
                    cur.execute("COMMIT")
                    removed.append(other)
                finally:
                    advisory_unlock(cur, other)
        return removed

    def staged_by_range(self, cur, ranges: Sequence[OffsetRange]) -> "StagedByRange":
        """What is staged for this attempt, in one pass over each staging table: rows and dead letters, records per
        planned range, and those outside every range (with one of them as topic[partition]@offset, formatted for
        those alone: for every row, that was a third of the query's time)."""
        planned, planned_args = ranges_unnest(ranges)
        cur.execute(sql.SQL(
            "WITH planned AS (SELECT * FROM {planned} WITH ORDINALITY AS r(t, p, f, u, i)), staged AS (SELECT "
            "source_topic AS t, source_partition AS p, source_offset AS o, false AS dead FROM {staging} WHERE "
            "batch_id = %s UNION ALL SELECT topic, partition, \"offset\", true FROM {dead} WHERE batch_id = %s) "
            "SELECT r.i, count(*) FILTER (WHERE NOT s.dead), count(*) FILTER (WHERE s.dead), "
            "min(format('%%s[%%s]@%%s', s.t, s.p, s.o)) FILTER (WHERE r.i IS NULL) FROM staged s "
            "LEFT JOIN planned r ON r.t = s.t AND r.p = s.p AND s.o >= r.f AND s.o < r.u GROUP BY r.i").format(
                planned=planned, staging=self.sink.staging, dead=STAGED_DEAD),
            (*planned_args, self.batch_id, self.batch_id))
        found = StagedByRange(StagedCounts(0, 0), [0] * len(ranges))
        for index, rows, dead, example in cur.fetchall():
            found.counts = StagedCounts(found.counts.rows + rows, found.counts.dead + dead)
            if index is None:
                found.outside, found.example_outside = rows + dead, example
            else:
                found.per_range[index - 1] = rows + dead
        return found

    def sample_dead_letters(self, limit: int = 3) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT topic, partition, \"offset\", error_class, error_message FROM {} "
                                "WHERE batch_id = %s ORDER BY partition, \"offset\" LIMIT %s").format(STAGED_DEAD),
                        (self.batch_id, limit))
            return [f"{t}[{p}]@{o} {c}: {m}" for t, p, o, c, m in cur.fetchall()]

    def discard(self) -> None:
        """Best effort removal of this attempt's staging after a failure (a later attempt would do it anyway)."""
        if self.conn is None or self.conn.closed:
            return
        try:
            with self.conn.cursor() as cur:
                cur.execute("BEGIN")
                # Lock the registry row first, as remove_abandoned does: a straggling executor still staging (it
                # holds the row FOR SHARE) finishes before the delete, so its rows are deleted too.
                cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR UPDATE", (self.batch_id,))
                delete_staged(cur, self.sink.staging, self.batch_id)
                cur.execute("COMMIT")
        except psycopg2.Error:
            log.warning("could not remove staging of batch %s; the next attempt will", self.batch_id)

    def release_space(self) -> None:
        """After this attempt's commit: TRUNCATE the staging tables when no other attempt is registered, so their
        files shrink to nothing instead of holding deleted rows until autovacuum comes round. Best effort: skipped
        when another attempt is registered or a lock is not granted at once.

        The table lock comes before the decisive look at the registry, so no attempt can stage between the two. A
        first look goes before it: while another attempt of the pipeline stages, the lock would wait, and that
        attempt's next COPYs would queue behind it."""
        checks = ((self.sink.staging, "pipeline = %s", (self.pipeline.name,)), (STAGED_DEAD, "true", ()))
        for table, scope, args in checks:
            try:
                with self.conn.cursor() as cur:
                    if not _unregistered(cur, scope, args):
                        continue
                    cur.execute("BEGIN")
                    cur.execute("SET LOCAL lock_timeout = '200ms'")
                    cur.execute(sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(table))
                    if _unregistered(cur, scope, args):
                        cur.execute(sql.SQL("TRUNCATE {}").format(table))
                    cur.execute("COMMIT")
            except psycopg2.Error:  # typically the lock was not granted at once; leave it to a later commit
                if self.conn.closed:
                    return
                with self.conn.cursor() as cur:
                    cur.execute("ROLLBACK")  # the connection is in autocommit mode: end the explicit transaction

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()  # ends the session, which releases the attempt's advisory lock


def _unregistered(cur, scope: str, args: tuple) -> bool:
    """No attempt in the registry within `scope` (a fixed SQL condition)."""
    cur.execute(f"SELECT count(*) = 0 FROM microingest.staging_batches WHERE {scope}", args)
    return cur.fetchone()[0]


class _Discard:
    """Where a task whose records an earlier attempt staged writes them: nowhere."""

    def write(self, data) -> None:
        pass

    def writelines(self, lines) -> None:
        pass


def stage_part(params: dict[str, Any], pipeline: Pipeline, batch_id: str, first: tuple[str, int, int] | None,
               decode: Callable[[BinaryIO, TextIO], StagedCounts]) -> StagedCounts:
    """Executor side: stage one Spark partition in one transaction. `decode(rows, dead)` writes its good rows as CSV
    bytes and its dead letters as COPY text, and returns their counts; the rows are COPYed into staging while it
    writes them.

    `first` is the position (topic, partition, offset) of the Spark partition's first record. A Spark partition is a
    fixed set of whole offset ranges (one, or several coalesced for a small batch), so a retried or speculative copy
    of its task brings the same records: under a lock on that position, finding it staged (as a row or a dead
    letter) means an earlier attempt's transaction staged them all, and nothing is written twice (they are decoded
    again, for their counts). The rows are written once, straight into staging."""
    sink = sink_for(pipeline)
    with connection(params) as conn, conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR SHARE", (batch_id,))
        if cur.fetchone() is None:
            raise LedgerError(f"batch {batch_id} is no longer registered (its attempt was abandoned); not staging")
        if first is None:
            return StagedCounts(0, 0)
        topic, partition, offset = first
        advisory_lock(cur, f"microingest:stage:{batch_id}:{topic}:{partition}:{offset}", transaction=True)
        cur.execute(sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE batch_id = %s AND source_topic = %s AND "
                            "source_partition = %s AND source_offset = %s) OR EXISTS (SELECT 1 FROM {} WHERE "
                            "batch_id = %s AND topic = %s AND partition = %s AND \"offset\" = %s)").format(
            sink.staging, STAGED_DEAD), (batch_id, topic, partition, offset) * 2)
        if cur.fetchone()[0]:
            log.info("batch %s: %s[%s] from offset %s was staged by an earlier attempt of this task", batch_id, topic,
                     partition, offset)
            return decode(_Discard(), _Discard())
        with tempfile.SpooledTemporaryFile(_SPILL_BYTES, mode="w+") as dead:
            counts = copy_while_producing(cur, sink.staging, sink.staging_columns, lambda rows: decode(rows, dead),
                                          csv=True)
            if counts.dead:
                dead.seek(0)
                cur.copy_expert(copy_statement(cur, STAGED_DEAD, DEAD_LETTER_COLUMNS), dead)
    return counts
