"""The check of the JVM decoder's values before anything of a batch is written: the values of the records it took in
the reference's Arrow types (`jvm_values`), and a sample of those records decoded again by the reference, which must
give the same values (`check_sample`). The driver runs it on what it collects (`jvm_collected`); a batch whose rows
stay in Spark for its statement runs it on the executors (`jvm_typed`)."""

from __future__ import annotations

import logging
import math
import struct
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microingest.declare.pipeline import Pipeline
from microingest.decode.batch_columns import arrow_column, arrow_field
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import kafka_headers
from microingest.errors import Refused

log = logging.getLogger(__name__)


class JvmMismatchError(Refused):
    """A record the JVM decoded came out of the reference with other values. Nothing of the batch was written; the job
    decodes it again by the reference alone."""


def log_share(batch_id: str, taken: int, checked: int, declined: int) -> None:
    log.info(
        "batch %s: %d records decoded in the JVM (%d of them checked against the reference), %d by the reference",
        batch_id,
        taken,
        checked,
        declined,
    )


def jvm_values(d: pa.ChunkedArray, pipeline: Pipeline) -> list[pa.ChunkedArray]:
    """(record_key, is_tombstone, value columns...) of the taken records, in the reference's Arrow types."""
    tombstones = pa.chunked_array([pa.repeat(pa.scalar(False), len(chunk)) for chunk in d.chunks], pa.bool_())
    columns = [pc.struct_field(d, [0]), tombstones]
    for i, field in enumerate(pipeline.schema):
        # A timestamp comes as its microseconds, a UUID as its 16 bytes in a binary of any length.
        columns.append(pc.struct_field(d, [i + 1]).cast(arrow_field(field).type))
    return columns


def corrupted(values: list[pa.ChunkedArray], pipeline: Pipeline) -> list[pa.ChunkedArray]:
    """The fault `jvm_self_check:corrupt`: every value of the first text field ends in "~", as a wrong decoder's
    would differ."""
    at = 2 + next(i for i, f in enumerate(pipeline.schema) if f.type == "string")
    return [*values[:at], pc.binary_join_element_wise(values[at], "~", ""), *values[at + 1 :]]


def check_sample(taken: pa.Table, values: list[pa.ChunkedArray], processor: RecordProcessor, batch_id: str) -> int:
    """The taken records that came back with their bytes, decoded again by the reference: the same values, or the
    batch is refused (JvmMismatchError) before anything is written. How many were checked."""
    sampled = pc.indices_nonzero(pc.is_valid(taken.column("value")))
    records = taken.select(["topic", "partition", "offset", "key", "value", "headers"]).take(sampled).to_pylist()
    wheres = [f"{r['topic']}[{r['partition']}]@{r['offset']}" for r in records]
    processed = []
    for record, where in zip(records, wheres, strict=True):
        try:
            processed.append(processor.process(record["key"], record["value"], kafka_headers(record["headers"])))
        except BadRecord as exc:
            raise JvmMismatchError(
                f"batch {batch_id}: the JVM decoded {where}, which the reference makes a dead letter "
                f"({exc.error_class})"
            ) from None
    schema = processor.pipeline.schema
    # The reference's values in their staged form (a UUID's bytes, a decimal at its scale), as the JVM's come.
    by_column = list(zip(*processed)) or [()] * (2 + len(schema))
    expected = [list(by_column[0]), list(by_column[1])]
    expected += [arrow_column(field, column).to_pylist() for field, column in zip(schema, by_column[2:])]
    names = ["record key", "tombstone"] + [f"field '{f.name}'" for f in schema]
    for name, column, wanted in zip(names, values, expected, strict=True):
        for where, a, b in zip(wheres, column.take(sampled).to_pylist(), wanted, strict=True):
            if not _same(a, b):
                raise JvmMismatchError(f"batch {batch_id}: the JVM's {name} of {where} differs from the reference's")
    return len(sampled)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, list) and isinstance(b, list):  # an array's items
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return (
            isinstance(a, float)
            and isinstance(b, float)
            and struct.pack(">d", a) == struct.pack(">d", b)
            and not math.isnan(a)
        )
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a.as_tuple() == b.as_tuple()  # the same digits at the same scale
    return type(a) is type(b) and a == b
