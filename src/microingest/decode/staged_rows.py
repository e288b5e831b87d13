"""One Arrow batch of Kafka records → its staged rows (an Arrow table in the staging table's column order, sent to
Postgres in binary COPY form by `copy_binary`) and its dead letters (COPY text lines).

The batch is decoded whole by `arrow_json` (JSON) or `avro_batch` (Avro) when it can be, else record by record by
`records.RecordProcessor`, which sorts out the dead letters. Either way the rows come out in the same Arrow types
(`batch_columns.ARROW_TYPES`), the types the staging table and a target declare.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

from microingest.batches import NOTED_DEAD_LETTERS, ROW_COLUMNS, WITHHELD_MARK, DeadLetterNote, StoredRecord
from microingest.declare.pipeline import Pipeline
from microingest.decode import arrow_json, avro_batch, storable
from microingest.decode.batch_columns import arrow_column, arrow_field
from microingest.decode.codec import copy_text_row
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.registered import required

KAFKA_COLUMNS = ("topic", "partition", "offset", "ts_micros", "key", "value", "headers")  # as spark.batch reads them
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_KAFKA_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass
class StagedBatch:
    rows: pa.Table
    dead_letters: list[str]
    notes: list[DeadLetterNote] = field(default_factory=list)  # the first few dead letters' origin and reason


def stage_batch(
    batch: pa.RecordBatch, processor: RecordProcessor, batch_id: str, dead_letter_lead: tuple[str, ...] | None = None
) -> StagedBatch:
    """The staged rows and dead letters of one Arrow batch with KAFKA_COLUMNS. Each dead letter's line starts with
    `dead_letter_lead` (by default the batch id alone, as staging keeps them)."""
    lead = (batch_id,) if dead_letter_lead is None else dead_letter_lead
    decoded = whole_batch(batch, processor)
    if decoded is not None:
        return StagedBatch(rows_table(batch, batch_id, decoded, processor.pipeline), [])
    kept, staged, dead = [], [], []
    notes: list[DeadLetterNote] = []
    withheld = bool(processor.pipeline.mask)
    for i, (record, verdict) in enumerate(processed(batch, processor)):
        if isinstance(verdict, BadRecord):
            reason = WITHHELD if withheld else str(verdict)
            dead.append(_dead_letter(lead, record, verdict.error_class, reason, withheld))
            if len(notes) < NOTED_DEAD_LETTERS:
                notes.append(DeadLetterNote(record[0], record[1], record[2], verdict.error_class, reason))
            continue
        staged.append(verdict)
        kept.append(i)
    schema = processor.pipeline.schema
    columns = list(zip(*staged)) or [()] * (2 + len(schema))
    decoded = [pa.array(columns[0], pa.string()), pa.array(columns[1], pa.bool_())]
    decoded += [arrow_column(field, values) for field, values in zip(schema, columns[2:])]
    return StagedBatch(
        rows_table(batch.take(pa.array(kept, pa.int64())), batch_id, decoded, processor.pipeline), dead, notes
    )


def processed(batch: pa.RecordBatch, processor: RecordProcessor) -> Iterator[tuple[tuple, tuple | BadRecord]]:
    """Each record of the batch (its KAFKA_COLUMNS) with its staged values, or why it is a dead letter: the reference
    decoder, record by record."""
    reads_headers = any(f.source == "header" for f in processor.pipeline.schema)
    for record in _records(batch):
        key, value, headers = record[4:]
        try:
            yield record, processor.process(key, value, kafka_headers(headers) if reads_headers else ())
        except BadRecord as exc:
            yield record, exc


def dead_letters(
    batch: pa.RecordBatch, dead_letter_lead: tuple[str, ...], error_class: str, message: str, withheld: bool = False
) -> list[str]:
    """Every record of the batch as a dead letter of one class and message (a skip's); `withheld`: without the
    record's key, value and headers (a pipeline that masks fields, `WITHHELD`)."""
    return [_dead_letter(dead_letter_lead, record, error_class, message, withheld) for record in _records(batch)]


# The reason a masked pipeline's dead letters give. They keep where the record is and its class, not its key, value
# or headers, nor a reason that could quote them: a masked value must land nowhere unmasked. The record stays in
# Kafka at its position for a backfill to read again once the cause is fixed. A skip's note follows WITHHELD_MARK.
WITHHELD = WITHHELD_MARK + "the pipeline masks fields; the record is in Kafka at this position"


def _dead_letter(lead: tuple[str, ...], record: tuple, error_class: str, message: str, withheld: bool = False) -> str:
    topic, partition, offset, ts_micros, key, value, headers = record
    if withheld:
        key, value, headers = None, None, None
        message = message if message.startswith(WITHHELD_MARK) else WITHHELD_MARK + message
    return copy_text_row(
        (
            *lead,
            topic,
            partition,
            offset,
            _kafka_time(ts_micros),
            key,
            value,
            headers_json(headers),
            error_class,
            storable.message(message),
        )
    )


def whole_batch(batch: pa.RecordBatch, processor: RecordProcessor) -> list[pa.Array] | None:
    """The batch's staged columns decoded at once, when its format's whole-batch decoder takes it."""
    keys, values, pipeline = batch.column("key"), batch.column("value"), processor.pipeline
    if pipeline.value_format == "avro":
        return avro_batch.decode_values(keys, values, pipeline, required(processor.registry, "avro"))
    return arrow_json.decode_values(keys, values, pipeline)


def rows_table(batch: pa.RecordBatch, batch_id: str, decoded: list[pa.Array], pipeline: Pipeline) -> pa.Table:
    """The decoded rows in ROW_LAYOUT, then the declared value fields, each column by its name."""
    source = [
        batch.column("topic"),
        batch.column("partition"),
        batch.column("offset"),
        batch.column("ts_micros").cast(_KAFKA_TIMESTAMP),
        pa.repeat(pa.scalar(batch_id, pa.string()), batch.num_rows),
    ]
    columns = source + decoded
    fields = [pa.field(name, column.type) for name, column in zip(ROW_COLUMNS, columns)]
    fields += [arrow_field(f) for f in pipeline.schema]  # a json column marked for jsonb
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _kafka_time(ts_micros: int | None) -> datetime | None:
    # Brokers refuse timestamps over an hour ahead by default; a topic allowing more could carry one past year 9999.
    # The dead letter keeps the record whole without it, rather than fail the batch over a column of its own.
    try:
        return None if ts_micros is None else _EPOCH + timedelta(microseconds=ts_micros)
    except OverflowError:
        return None


def _records(batch: pa.RecordBatch) -> Iterator[tuple]:
    """Rows of an Arrow record batch, column by column into Python objects (far cheaper than unpickling rows)."""
    return zip(*(batch.column(name).to_pylist() for name in KAFKA_COLUMNS))


def kafka_headers(spark_json: str | None) -> list[tuple[str, bytes | None]]:
    """Kafka headers, as Spark's to_json gives them ([{"key": str, "value": base64 text}], no "value" for a null
    one), as (name, value bytes or None) pairs in their order."""
    if not spark_json:
        return []
    return [
        (h["key"], None if h.get("value") is None else base64.b64decode(h["value"])) for h in json.loads(spark_json)
    ]


def headers_json(spark_json: str | None) -> list[dict] | None:
    """Kafka headers, as Spark's to_json gives them, in the dead-letter table's form (`stored_headers`)."""
    return stored_headers(kafka_headers(spark_json))


def stored_headers(headers: list[tuple[str, bytes | None]]) -> list[dict] | None:
    """(name, value bytes or None) pairs as the dead-letter table keeps them: name and value as text where jsonb can
    hold them (UTF-8 without NUL), else as base64 of their bytes in `key_base64` / `value_base64`."""
    if not headers:
        return None
    out = []
    for key, value in headers:
        entry: dict[str, Any] = {}
        try:
            entry["key"] = storable.text(key)
        except storable.Unstorable:
            entry["key_base64"] = base64.b64encode(key.encode("utf-8", "surrogatepass")).decode("ascii")
        if value is not None:
            try:
                entry["value"] = storable.text(value.decode("utf-8"))
            except (UnicodeDecodeError, storable.Unstorable):
                entry["value_base64"] = base64.b64encode(value).decode("ascii")
        out.append(entry)
    return out


def stored_records_batch(records: Sequence[StoredRecord]) -> pa.RecordBatch:
    """Dead letters' records as a batch read from Kafka gives them (KAFKA_COLUMNS, headers in Spark's to_json form):
    what a redrive decodes again, by the same decoder as any batch."""
    micros = [
        None if r.kafka_timestamp is None else (r.kafka_timestamp - _EPOCH) // timedelta(microseconds=1)
        for r in records
    ]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array(micros, pa.int64()),
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([spark_headers(r.headers) for r in records], pa.string()),
        ],
        names=list(KAFKA_COLUMNS),
    )


def spark_headers(stored: list[dict] | None) -> str | None:
    """Headers as the dead-letter table keeps them (`stored_headers`) back in Spark's to_json form."""
    if not stored:
        return None
    out = []
    for entry in stored:
        key = entry["key"] if "key" in entry else base64.b64decode(entry["key_base64"]).decode("utf-8", "surrogatepass")
        header = {"key": key}
        if "value" in entry:
            header["value"] = base64.b64encode(entry["value"].encode("utf-8")).decode("ascii")
        elif "value_base64" in entry:
            header["value"] = entry["value_base64"]
        out.append(header)
    return json.dumps(out)
