"""The Postgres ledger and the commit protocol that makes each record land exactly once.

Protocol for one batch attempt (driver = the Spark driver, executors = Spark tasks):

1. The driver opens a `BatchAttempt`: takes a session advisory lock on a fresh batch id, lists the id in
   microingest.staging_batches, and removes the staged rows of earlier attempts whose lock is free (their driver died).
2. Executors `stage_part` in parallel, each Spark partition in its own transaction, into the pipeline's staging table
   (rows) and microingest_staging.dead_letters (bad records). A batch that is no longer listed is refused, so a
   straggler of a dead attempt cannot leave rows behind; a re-run task's rows are ignored as already staged.
3. The driver `publish`es in ONE transaction: lock the pipeline, check that the ledger still holds each range's
   planned `from` (else `FencedError`: another run got there first), check the staged counts, publish the staged rows
   through the sink, move the dead letters, advance the ledger to each range's `until`, write the batch history
   (with any retention gap skipped), drop the staging rows.

A crash anywhere before step 3 commits leaves the target and the ledger untouched; the next run re-reads the same range.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any, Iterator, Sequence

import psycopg2
from psycopg2 import sql

from microingest import faults
from microingest.declarations import Pipeline
from microingest.planning import OffsetRange
from microingest.sinks import sink_for

log = logging.getLogger(__name__)


class LedgerError(RuntimeError):
    pass


class PostgresUnavailableError(LedgerError):
    pass


class FencedError(LedgerError):
    """The ledger moved since the batch was planned: another run committed (some of) these offsets."""


class StagingMismatchError(LedgerError):
    pass


def connect(params: dict[str, Any]):
    try:
        return psycopg2.connect(**params)
    except psycopg2.OperationalError as exc:
        where = f"{params.get('host')}:{params.get('port')}/{params.get('dbname')}"
        # psycopg2's message can include the DSN; keep only its first line, which never holds the password.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PostgresUnavailableError(f"Postgres at {where} is unreachable: {reason}") from None


@contextmanager
def connection(params: dict[str, Any]) -> Iterator[Any]:
    conn = connect(params)
    try:
        yield conn
    finally:
        conn.close()


def read_ledger(conn, pipeline: str, topic: str) -> dict[int, int]:
    with conn.cursor() as cur:
        cur.execute("SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = %s",
                    (pipeline, topic))
        return dict(cur.fetchall())


@dataclass(frozen=True)
class RunInfo:
    """Who asked for the batch; recorded in the history row."""

    dag_id: str | None = None
    run_id: str | None = None
    task_try: int | None = None
    kind: str = "ingest"

    def to_dict(self) -> dict:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "task_try": self.task_try, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict | None) -> "RunInfo":
        return cls(**(d or {}))


@dataclass(frozen=True)
class CommitResult:
    batch_id: str
    rows_written: int
    records_read: int
    dead_letters: int
    ranges: tuple[OffsetRange, ...]


def _fence_and_advance(cur, pipeline: str, ranges: Sequence[OffsetRange], batch_id: str) -> None:
    """Inside the commit transaction: verify every range's planned start, then move the ledger to its end."""
    cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"microingest:pipeline:{pipeline}",))
    topics = sorted({r.topic for r in ranges})
    cur.execute("SELECT topic, partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = ANY(%s) "
                "FOR UPDATE", (pipeline, topics))
    current = {(t, p): o for t, p, o in cur.fetchall()}
    stale = [(r, current.get((r.topic, r.partition))) for r in ranges
             if current.get((r.topic, r.partition)) != r.ledger_offset]
    if stale:
        detail = "; ".join(
            f"{r.topic}[{r.partition}] planned from ledger offset {r.ledger_offset if r.ledger_offset is not None else 'none'}"
            f" but the ledger now holds {now if now is not None else 'none'}" for r, now in stale)
        raise FencedError(f"fenced: pipeline '{pipeline}' batch {batch_id} lost the race for its offsets ({detail}); "
                          "another run committed them first, nothing from this batch was written")
    cur.executemany(
        "INSERT INTO microingest.ledger (pipeline, topic, partition, next_offset, batch_id, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (pipeline, topic, partition) DO UPDATE "
        "SET next_offset = EXCLUDED.next_offset, batch_id = EXCLUDED.batch_id, updated_at = now()",
        [(pipeline, r.topic, r.partition, r.until_offset, batch_id) for r in ranges])


def _record_batch(cur, pipeline: str, batch_id: str, ranges: Sequence[OffsetRange], run: RunInfo, *,
                  records_read: int, rows_written: int, started_at: datetime, staged_at: datetime | None,
                  dead_letters: int = 0, spark_app_id: str | None = None) -> None:
    cur.execute(
        "INSERT INTO microingest.batches (batch_id, pipeline, kind, ranges, records_read, rows_written, dead_letters, "
        "gaps, started_at, staged_at, dag_id, run_id, task_try, spark_app_id) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
        (batch_id, pipeline, run.kind, json.dumps([r.to_dict() for r in ranges]), records_read, rows_written,
         dead_letters, _gaps_json(ranges), started_at, staged_at, run.dag_id, run.run_id, run.task_try, spark_app_id))


def _gaps_json(ranges: Sequence[OffsetRange]) -> str | None:
    """Offsets lost to retention that this batch skips (on_retention_gap: skip): audited, never silent."""
    gaps = [{"topic": r.topic, "partition": r.partition, "from": r.gap[0], "until": r.gap[1]} for r in ranges if r.gap]
    return json.dumps(gaps) if gaps else None


def pin_positions(params: dict[str, Any], pipeline: str, pins: Sequence[OffsetRange], run: RunInfo) -> str | None:
    """Record the starting position of partitions new to the ledger without reading them (start_from=latest)."""
    if not pins:
        return None
    batch_id = str(uuid.uuid4())
    started = datetime.now(timezone.utc)
    with connection(params) as conn, conn, conn.cursor() as cur:
        _fence_and_advance(cur, pipeline, pins, batch_id)
        _record_batch(cur, pipeline, batch_id, pins, RunInfo(run.dag_id, run.run_id, run.task_try, "pin"),
                      records_read=0, rows_written=0, started_at=started, staged_at=None)
    return batch_id


DEAD_LETTER_COLUMNS = ("batch_id", "topic", "partition", "offset", "kafka_timestamp", "record_key", "record_value",
                       "headers", "error_class", "error_message")
_STAGED_DEAD = sql.Identifier("microingest_staging", "dead_letters")


def _delete_staged(cur, staging: sql.Identifier, batch_id: str) -> None:
    cur.execute(sql.SQL("DELETE FROM {} WHERE batch_id = %s").format(staging), (batch_id,))
    cur.execute(sql.SQL("DELETE FROM {} WHERE batch_id = %s").format(_STAGED_DEAD), (batch_id,))
    cur.execute("DELETE FROM microingest.staging_batches WHERE batch_id = %s", (batch_id,))


@dataclass(frozen=True)
class StagedCounts:
    """What the executors report having staged: rows for the target, and dead letters."""

    rows: int
    dead: int

    @property
    def records(self) -> int:
        return self.rows + self.dead


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
            self.sink.check_target(cur)
            cur.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (self.batch_id,))
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
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"microingest:ddl:{self.pipeline.name}",))
        self.sink.ensure_staging(cur)
        cur.execute("COMMIT")

    def remove_abandoned(self) -> list[str]:
        """Drop staged rows of attempts whose driver is gone (their session advisory lock is free)."""
        removed = []
        with self.conn.cursor() as cur:
            cur.execute("SELECT batch_id::text FROM microingest.staging_batches WHERE pipeline = %s AND batch_id <> %s",
                        (self.pipeline.name, self.batch_id))
            for (other,) in cur.fetchall():
                cur.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (other,))
                if not cur.fetchone()[0]:
                    continue  # its driver is alive: a concurrent run, which the fence will sort out
                try:
                    cur.execute("BEGIN")
                    cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR UPDATE", (other,))
                    _delete_staged(cur, self.sink.staging, other)
                    cur.execute("COMMIT")
                    removed.append(other)
                finally:
                    cur.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (other,))
        return removed

    def publish(self, ranges: Sequence[OffsetRange], staged: StagedCounts, run: RunInfo,
                staged_at: datetime | None = None, spark_app_id: str | None = None) -> CommitResult:
        """The single transaction: fence, publish staged rows and dead letters, advance the ledger, record history,
        clean staging."""
        conn = self.conn
        conn.autocommit = False
        try:
            with conn.cursor() as cur:
                _fence_and_advance(cur, self.pipeline.name, ranges, self.batch_id)
                found = StagedCounts(self._count(cur, self.sink.staging), self._count(cur, _STAGED_DEAD))
                if found != staged:
                    raise StagingMismatchError(
                        f"batch {self.batch_id}: executors reported {staged.rows} rows and {staged.dead} dead letters "
                        f"but {found.rows} and {found.dead} are staged; nothing was committed")
                written = self.sink.publish(cur, self.batch_id)
                columns = sql.SQL(", ").join(map(sql.Identifier, DEAD_LETTER_COLUMNS))
                cur.execute(sql.SQL("INSERT INTO microingest.dead_letters (pipeline, {}) SELECT %s, {} FROM {} "
                                    "WHERE batch_id = %s").format(columns, columns, _STAGED_DEAD),
                            (self.pipeline.name, self.batch_id))
                _record_batch(cur, self.pipeline.name, self.batch_id, ranges, run, records_read=staged.records,
                              rows_written=written, dead_letters=staged.dead, started_at=self.started_at,
                              staged_at=staged_at, spark_app_id=spark_app_id)
                _delete_staged(cur, self.sink.staging, self.batch_id)
            faults.crash_point("before_commit")
            conn.commit()
        except BaseException:
            if not conn.closed:  # after a lost connection the server has rolled back already; keep the real error
                conn.rollback()
            raise
        finally:
            if not conn.closed:
                conn.autocommit = True
        return CommitResult(self.batch_id, written, staged.records, staged.dead, tuple(ranges))

    def sample_dead_letters(self, limit: int = 3) -> list[str]:
        with self.conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT topic, partition, \"offset\", error_class, error_message FROM {} "
                                "WHERE batch_id = %s ORDER BY partition, \"offset\" LIMIT %s").format(_STAGED_DEAD),
                        (self.batch_id, limit))
            return [f"{t}[{p}]@{o} {c}: {m}" for t, p, o, c, m in cur.fetchall()]

    def _count(self, cur, table: sql.Identifier) -> int:
        cur.execute(sql.SQL("SELECT count(*) FROM {} WHERE batch_id = %s").format(table), (self.batch_id,))
        return cur.fetchone()[0]

    def discard(self) -> None:
        """Best effort removal of this attempt's staging after a failure (a later attempt would do it anyway)."""
        if self.conn is None or self.conn.closed:
            return
        try:
            with self.conn.cursor() as cur:
                cur.execute("BEGIN")
                _delete_staged(cur, self.sink.staging, self.batch_id)
                cur.execute("COMMIT")
        except psycopg2.Error:
            log.warning("could not remove staging of batch %s; the next attempt will", self.batch_id)

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()  # ends the session, which releases the attempt's advisory lock


def stage_part(params: dict[str, Any], pipeline: Pipeline, batch_id: str, rows: IO[str], dead: IO[str],
               counts: StagedCounts) -> StagedCounts:
    """Executor side: stage one Spark partition's rows and dead letters (COPY text buffers) in one transaction."""
    sink = sink_for(pipeline)
    with connection(params) as conn, conn, conn.cursor() as cur:
        cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR SHARE", (batch_id,))
        if cur.fetchone() is None:
            raise LedgerError(f"batch {batch_id} is no longer registered (its attempt was abandoned); not staging")
        if counts.rows:
            _copy_idempotently(cur, sink.staging, sink.staging_columns, rows)
        if counts.dead:
            _copy_idempotently(cur, _STAGED_DEAD, DEAD_LETTER_COLUMNS, dead)
    return counts


def _copy_idempotently(cur, table: sql.Identifier, columns: Sequence[str], buffer: IO[str]) -> None:
    """COPY into a temporary twin, then insert what is not staged yet (a retried Spark task re-sends its rows)."""
    tmp = sql.Identifier(f"microingest_copy_{table.strings[-1]}")
    cols = sql.SQL(", ").join(map(sql.Identifier, columns))
    cur.execute(sql.SQL("CREATE TEMP TABLE {} (LIKE {}) ON COMMIT DROP").format(tmp, table))
    cur.copy_expert(sql.SQL("COPY {} ({}) FROM STDIN").format(tmp, cols).as_string(cur), buffer)
    cur.execute(sql.SQL("INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT DO NOTHING").format(table, cols, cols, tmp))
