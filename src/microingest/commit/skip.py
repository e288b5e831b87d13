"""The escape hatch for a partition that no retry gets past: move its live position forward by hand.

When a batch is refused for a reason that repeats on every retry (a dead-letter guard tripped by a broken producer, a
target constraint its rows violate), `skip` moves one partition's ledger from its position to `until` in one
transaction under the pipeline lock. Nothing vanishes: every skipped record is kept whole (key, value, headers,
timestamp) in microingest.dead_letters with error_class `skipped` and the operator's reason, and the history holds a
batch of kind `skip` saying who skipped what and why. A live run planned before the skip is fenced at its commit.
A later backfill over skipped positions resolves them (`overlap`): each becomes a row or a dead letter of its own.
"""

from __future__ import annotations

import io
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from psycopg2 import sql

from microingest.commit.history import BatchRecord, RunInfo, record_batch
from microingest.commit.ledger import fence_and_advance, lock_pipeline
from microingest.commit.sinks import SKIPPED
from microingest.declare.identifiers import identifier_list
from microingest.declare.pipeline import Pipeline
from microingest.decode import storable, timestamps
from microingest.decode.codec import copy_text_row
from microingest.decode.staged_rows import stored_headers
from microingest.plan.offsets import OffsetRange, RequestError
from microingest.plan.request import SkipRequest
from microingest.systems.kafka_access import partition_bounds, read_range
from microingest.systems.pipeline_systems import PipelineSystems

_COLUMNS = ("pipeline", "batch_id", "topic", "partition", "offset", "kafka_timestamp", "record_key", "record_value",
            "headers", "error_class", "error_message")


@dataclass(frozen=True)
class SkipResult:
    batch_id: str
    range: OffsetRange
    records: int
    note: str

    def summary(self) -> str:
        r = self.range
        lost = f"; offsets [{r.gap[0]}, {r.gap[1]}) were already deleted by retention (recorded as a gap)" \
            if r.gap else ""
        return (f"skipped {r}: {self.records} record(s) kept as dead letters ({SKIPPED}), live position now "
                f"{r.until_offset}{lost}; batch {self.batch_id}")

    def dry_run_summary(self) -> str:
        r = self.range
        return (f"would skip {r} ({r.size} offsets), the records kept as dead letters ({SKIPPED}); dry run: nothing "
                "written")


def skip(pipeline: Pipeline, request: SkipRequest, who: str, run: RunInfo | None = None, dry_run: bool = False,
         systems: PipelineSystems | None = None) -> SkipResult:
    """Move the partition's live position to `request.until`, the records on the way kept as dead letters;
    RequestError (with nothing written) when the request makes no sense against the ledger and Kafka. A dry run
    checks it all and writes nothing (its result counts the offsets, not the records)."""
    partition, until, reason = request.partition, request.until, request.reason.strip()
    if not reason:
        raise RequestError("reason", "a skip needs a reason: it is kept with the skipped records and in the history")
    systems = systems or PipelineSystems.of(pipeline)
    kafka = systems.kafka_client
    earliest, latest = partition_bounds(kafka, pipeline.topic)
    run = run or RunInfo()
    batch_id, started = str(uuid.uuid4()), datetime.now(timezone.utc)
    note = storable.message(f"skipped by {who}: {reason}")
    with systems.db() as conn:
        with conn, conn.cursor() as cur:
            lock_pipeline(cur, pipeline.name)
            positions = _ledger_positions(cur, pipeline)
            skipped = _checked(pipeline, partition, positions, until, earliest, latest)
            if dry_run:
                return SkipResult(batch_id, skipped, skipped.size, note)
            count = _keep_as_dead_letters(cur, pipeline, kafka, skipped, batch_id, note)
            fence_and_advance(cur, pipeline.name, [skipped], batch_id)
            record_batch(cur, pipeline.name, batch_id, [skipped], run,
                         BatchRecord("skip", count, 0, count, started, note=note))
    return SkipResult(batch_id, skipped, count, note)


def _ledger_positions(cur, pipeline: Pipeline) -> dict[int, int]:
    cur.execute("SELECT partition, next_offset FROM microingest.ledger WHERE pipeline = %s AND topic = %s",
                (pipeline.name, pipeline.topic))
    return dict(cur.fetchall())


def _checked(pipeline: Pipeline, partition: int, positions: dict[int, int], until: int, earliest: dict[int, int],
             latest: dict[int, int]) -> OffsetRange:
    """The range to skip: from the live position to `until`. For a partition whose first batch never committed, the
    live position is where the pipeline would start: its earliest offset (start_from earliest, or a partition added
    after the pipeline started). Offsets retention already deleted are no record to keep: the range starts at the
    earliest offset still there, and its gap [ledger, earliest) goes into the history as any retention gap does."""
    where = f"{pipeline.topic}[{partition}]"
    if partition not in latest:
        raise RequestError("partition", f"partition {partition} does not exist in topic {pipeline.topic} "
                                        f"(partitions: {', '.join(map(str, sorted(latest)))})")
    ledger = positions.get(partition)
    if ledger is None and pipeline.start_from != "earliest" and not positions:
        raise RequestError("partition", f"{where} has no live position yet: with start_from latest, the first "
                                        "run records it; run the pipeline once")
    position = earliest[partition] if ledger is None else ledger
    if until <= position:
        raise RequestError("until", f"until {until} is not beyond the live position {position} of {where}")
    if until > latest[partition]:
        raise RequestError("until", f"until {until} is beyond the log end of {where} (latest offset "
                                    f"{latest[partition]})")
    return OffsetRange(pipeline.topic, partition, max(position, earliest[partition]), until, ledger)


def _keep_as_dead_letters(cur, pipeline: Pipeline, kafka: dict, skipped: OffsetRange, batch_id: str,
                          note: str) -> int:
    """COPY the range's records into the dead letters, in chunks: a skip may pass many records."""
    columns = identifier_list(_COLUMNS)
    statement = sql.SQL("COPY microingest.dead_letters ({}) FROM STDIN").format(columns).as_string(cur)
    count, chunk = 0, io.StringIO()
    for record in read_range(kafka, skipped.topic, skipped.partition, skipped.from_offset, skipped.until_offset):
        ts = _kafka_time(record.timestamp)
        chunk.write(copy_text_row((pipeline.name, batch_id, record.topic, record.partition, record.offset, ts,
                                   record.key, record.value, stored_headers(record.headers), SKIPPED, note)))
        count += 1
        if count % 10_000 == 0:
            _flush(cur, statement, chunk)
            chunk = io.StringIO()
    _flush(cur, statement, chunk)
    return count


def _kafka_time(ms: int | None) -> datetime | None:
    # None for a record without a timestamp (-1), or one stamped beyond what Python and Postgres hold.
    try:
        return None if ms is None or ms < 0 else timestamps.from_epoch_millis(ms)
    except storable.Unstorable:
        return None


def _flush(cur, statement: str, chunk: io.StringIO) -> None:
    if chunk.tell():
        chunk.seek(0)
        cur.copy_expert(statement, chunk)

