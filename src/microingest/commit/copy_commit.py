"""The commit of a decoded batch: every record written to Postgres once, by COPY, inside the batch's transaction.

The executors (or the driver, for what Spark's JVM decoded) put the batch's rows in binary COPY form and its dead
letters in COPY text, and handed them to the driver (`spark.decoder`), which spooled them (`spool`); nothing was
written before this transaction, so a crash anywhere before its COPY leaves no trace to clean up. After the fence and
the read's proof (`read_proof`):

- a live batch of an append target COPYs its rows straight into the target and its dead letters into
  microingest.dead_letters;
- any other batch (upsert_latest and aggregate targets merge; a backfill settles its overlap first) COPYs into two
  tables of the transaction's own (`Sink.create_staging`) and publishes from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from psycopg2 import sql

from microingest.batches import (
    DEAD_LETTER_COLUMNS,
    NOTED_DEAD_LETTERS,
    Batch,
    CommitResult,
    DeadLetterNote,
    RunInfo,
    Span,
)
from microingest.commit.history import BatchRecord, record_batch
from microingest.commit.overlap import Settled
from microingest.commit.read_proof import ReadMismatchError, prove_read
from microingest.commit.sinks import Sink, StagedCounts
from microingest.commit.spool import READ_BYTES, Spool
from microingest.commit.transaction import commit_transaction, publish_staged, target_refusal
from microingest.declare.identifiers import identifier_list
from microingest.decode.copy_binary import HEADER, TRAILER

DEAD_LETTERS = sql.Identifier("microingest", "dead_letters")


@dataclass
class DecodedBatch:
    """A batch as the executors decoded it: rows as binary COPY tuples (`copy_binary`, without the COPY's header),
    dead letters as COPY text, each spooled; and what was read."""

    batch_id: str
    rows: Spool
    dead: Spool
    counts: StagedCounts
    spans: list[Span]
    into_target: bool  # rows in the target's columns and dead letters naming the pipeline, or the staged layout
    started_at: datetime  # when its read began
    decoded_at: datetime  # when the driver held all of it
    notes: list[DeadLetterNote] = field(default_factory=list)  # the first few dead letters, typed
    # (topic, partition, offset) of each record transform_sql filtered out, for a staged batch (a backfill settles
    # what the target already holds there: `overlap.settle_overlap`)
    filtered_at: list[tuple[str, int, int]] = field(default_factory=list)
    decoded_in_jvm: int = 0  # records the JVM's strict decoder read; the rest, the reference in Python workers
    chunks: int = 1  # the Arrow chunks the driver collected it in

    def close(self) -> None:
        """Let its spools go (their memory, or their temporary files) once the batch was committed or given up."""
        self.rows.close()
        self.dead.close()

    def spooled(self) -> str:
        """How the batch came to the driver and where its COPY data waits, for the log."""
        size = self.rows.size + self.dead.size
        where = "on disk past the driver's bound" if self.rows.on_disk or self.dead.on_disk else "in memory"
        return f"collected in {self.chunks} chunk(s), {size:,} bytes of COPY data {where}"

    def sample_dead_letters(self, limit: int = NOTED_DEAD_LETTERS) -> list[str]:
        """The first few dead letters as topic[partition]@offset class: message."""
        return [str(note) for note in self.notes[:limit]]


def copy_statement(cur, table: sql.Identifier, columns: Sequence[str], binary: bool) -> str:
    options = sql.SQL(" (FORMAT binary)" if binary else "")
    return sql.SQL("COPY {} ({}) FROM STDIN{}").format(table, identifier_list(columns), options).as_string(cur)


def copy_spooled(cur, table, columns: Sequence[str], spooled: Spool, binary: bool) -> int:
    """COPY what was spooled (binary tuples, or lines of text) into `table`; returns the rows Postgres took. Nothing
    spooled runs no COPY."""
    if not spooled:
        return 0
    reader = spooled.reader(HEADER, TRAILER) if binary else spooled.reader()
    cur.copy_expert(copy_statement(cur, table, columns, binary), reader, size=READ_BYTES)
    return cur.rowcount


def commit_decoded(conn, sink: Sink, batch: Batch, decoded: DecodedBatch, run: RunInfo) -> CommitResult:
    """Prove the read, then fence, write the batch once and record its history: one transaction."""
    batch_id = decoded.batch_id
    prove_read(decoded.spans, batch.ranges, decoded.counts.records, batch_id)
    if batch.is_backfill and len(decoded.filtered_at) != decoded.counts.filtered:
        raise ReadMismatchError(
            f"batch {batch_id}: {decoded.counts.filtered} records were filtered out but {len(decoded.filtered_at)} "
            "positions say where; nothing was committed"
        )
    pipeline, counts = sink.pipeline.name, decoded.counts
    with commit_transaction(conn, batch, pipeline, batch_id) as cur:
        if decoded.into_target:
            with target_refusal(sink, batch, batch_id):
                written = copy_spooled(cur, sink.target, sink.target_columns(), decoded.rows, binary=True)
            dead = copy_spooled(cur, DEAD_LETTERS, ("pipeline",) + DEAD_LETTER_COLUMNS, decoded.dead, binary=False)
            _check_copied(batch_id, counts, StagedCounts(written, dead))
            settled = Settled(counts, 0)
        else:
            sink.create_staging(cur)
            copied = StagedCounts(
                copy_spooled(cur, sink.staging, sink.staging_columns, decoded.rows, binary=True),
                copy_spooled(cur, sink.staged_dead, DEAD_LETTER_COLUMNS, decoded.dead, binary=False),
            )
            _check_copied(batch_id, counts, copied)
            written, settled = publish_staged(cur, sink, batch, batch_id, counts, decoded.filtered_at)
        kept = settled.kept
        # A filtered record whose position a skip_existing backfill found already there counts as already there.
        filtered = counts.filtered - settled.present_filtered
        # Last before COMMIT, so the history's committed_at is when the publish really ended.
        record_batch(
            cur,
            pipeline,
            batch_id,
            batch.ranges,
            run,
            BatchRecord(
                batch.kind,
                counts.records,
                written,
                kept.dead,
                decoded.started_at,
                decoded.decoded_at,
                batch.number,
                _note(batch, settled, filtered, sink.pipeline.transform_sql),
                filtered,
                decoded.decoded_in_jvm,
            ),
        )
    already = counts.written - kept.written + settled.present_filtered
    return CommitResult(batch_id, written, counts.records, kept.dead, tuple(batch.ranges), already)


def _note(batch: Batch, settled: Settled, filtered: int, statement: str | None) -> str | None:
    if batch.is_skip:
        return batch.note
    if batch.is_redrive:
        kept = settled.kept
        return f"{batch.note}: {kept.rows} resolved, {kept.dead} still dead letters"
    notes = [settled.note(), filtered_note(filtered, statement) if filtered else None]
    return "; ".join(n for n in notes if n) or None


def filtered_note(filtered: int, statement: str | None) -> str:
    """How many records a batch's transform_sql filtered out, and by which statement (as the declaration had it
    then: it may have changed since), on one line."""
    said = " ".join((statement or "").split())
    if len(said) > STATEMENT_NOTED:
        said = said[: STATEMENT_NOTED - 1] + "…"
    return f"{filtered} record(s) filtered out by transform_sql: {said}"


STATEMENT_NOTED = 300  # characters of the statement a batch's note keeps


def _check_copied(batch_id: str, decoded: StagedCounts, copied: StagedCounts) -> None:
    if (copied.rows, copied.dead) != (decoded.rows, decoded.dead):
        raise ReadMismatchError(
            f"batch {batch_id}: {decoded.rows} rows and {decoded.dead} dead letters were decoded "
            f"but COPY took {copied.rows} and {copied.dead}; nothing was committed"
        )
