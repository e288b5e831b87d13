"""The rules both whole-batch decoders (`arrow_json`, `avro_batch`) share: which record keys stage as they are, and
whether a decoded column holds only values the reference (`records.RecordProcessor`) would stage unchanged.

Each answers None when some record needs the reference's verdict; the caller then hands the whole batch to it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microingest.declare.pipeline import Field, Pipeline
from microingest.decode import storable
from microingest.decode.json_values import json_text

ARROW_TYPES = {
    "string": pa.string(),
    "integer": pa.int64(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}
# The staged form of the types only the reference decodes: a uuid as its 16 bytes (what uuid_recv reads), a json
# value as its text, marked for the COPY encoder to send as jsonb.
_STAGED_TYPES = {"date": pa.date32(), "uuid": pa.binary(16), "bytes": pa.binary(), "json": pa.string()}
PG_TYPE_KEY = b"microingest.pg_type"
READ_TYPES = {**ARROW_TYPES, "timestamp": pa.int64()}  # a number of ms (or µs), converted by `checked`
MICROS_PER_MS = 1000
# A number with an exponent of 16 digits or more, anywhere in a value (in text too: a decoder may decline more than it
# must). Python's Decimal, which the reference reads JSON numbers with, refuses exponents from about 10**18 (an
# `invalid_json` dead letter), where Arrow and Jackson read 0, -0 or infinity. StrictJsonDecoder.java scans the same.
HUGE_EXPONENT = r"[eE][+-]?0*[1-9][0-9]{15}"


def arrow_field(field: Field) -> pa.Field:
    """The staged column of a declared field."""
    if field.type == "array" and field.kind in _ARRAY_ELEMENTS:
        return pa.field(field.name, pa.binary())  # each value in Postgres' own binary array form (`pg_array`)
    if field.kind == "decimal":
        arrow: pa.DataType = pa.decimal128(field.precision or 1, field.scale or 0)
    else:
        arrow = ARROW_TYPES.get(field.kind) or _STAGED_TYPES[field.kind]
    if field.type == "array":
        arrow = pa.list_(arrow)
    return pa.field(field.name, arrow, metadata={PG_TYPE_KEY: b"jsonb"} if field.type == "json" else None)


def arrow_column(field: Field, values: Sequence[Any]) -> pa.Array:
    """A declared field's converted values (`converters.convert`'s, or None) as its staged column."""
    if field.type == "uuid":
        values = [None if v is None else v.bytes for v in values]
    elif field.type == "array" and field.kind in _ARRAY_ELEMENTS:
        values = [None if v is None else pg_array(field.kind, v) for v in values]
    elif field.type == "json":
        values = [None if v is None else json_text(v) for v in values]
    return pa.array(values, arrow_field(field).type)


def pg_array(kind: str, items: Sequence[Any]) -> bytes:
    """A one-dimensional array of timestamps or UUIDs as Postgres' array_recv reads it: dimensions, whether it holds
    NULL, the element type's oid, each element's length and its binary form (µs since 2000-01-01 UTC; 16 bytes)."""
    oid, element = _ARRAY_ELEMENTS[kind]
    parts = [
        struct.pack(">iiI", 1 if items else 0, 1 if None in items else 0, oid),
        struct.pack(">ii", len(items), 1) if items else b"",
    ]
    for item in items:
        if item is None:
            parts.append(struct.pack(">i", -1))
        else:
            data = element(item)
            parts.append(struct.pack(">i", len(data)) + data)
    return b"".join(parts)


_PG_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
# Arrays the COPY encoder cannot write as these columns want (it marks their elements timestamp and bytea, and
# array_recv checks the mark): the element type's oid, and an element's binary form.
_ARRAY_ELEMENTS: dict[str, tuple[int, Any]] = {
    "timestamp": (1184, lambda t: struct.pack(">q", (t - _PG_EPOCH) // timedelta(microseconds=1))),
    "uuid": (2950, lambda u: u.bytes),
}


def staged_keys(keys: pa.Array, values: pa.Array, pipeline: Pipeline, value_format: str) -> pa.Array | None:
    """The record keys as text, when a whole-batch decoder of `value_format` may take the batch at all: the
    pipeline's values are in that format, with no transform (user Python code), every declared field is flat
    (`Field.flat`), and every value is present (no tombstones); every key is valid UTF-8 without NUL and not
    beginning with a backslash and x (present, for upsert_latest): staged as it is, not in `storable.key_text`'s
    escaped form."""
    if pipeline.transform is not None or pipeline.value_format != value_format or pipeline.key_format != "string":
        return None
    if not all(field.flat for field in pipeline.schema):
        return None
    if len(values) == 0 or values.null_count:
        return None
    record_keys = utf8(keys)
    if record_keys is None or (pipeline.sink_mode == "upsert_latest" and record_keys.null_count):
        return None
    if (
        pc.any(pc.match_substring(record_keys, "\x00")).as_py()
        or pc.any(pc.starts_with(record_keys, storable.KEY_HEX_PREFIX)).as_py()
    ):
        return None
    return record_keys


def utf8(array: pa.Array) -> pa.Array | None:
    try:
        return pc.cast(array, pa.string())
    except pa.ArrowInvalid:
        return None


def checked(field: Field, column: pa.Array, micros_per_unit: int = MICROS_PER_MS) -> pa.Array | None:
    """The column (read as READ_TYPES, timestamps as numbers of `micros_per_unit` µs) as the reference would type
    it, or None when some value needs the reference's verdict: a null in a required field, NUL in a string, a
    double that is not finite, a timestamp outside the years 1 to 9999 (`storable.MIN_EPOCH_MICROS` and MAX_).
    Within them a whole number of ms or µs is the reference's instant exactly: it converts by integer arithmetic."""
    if field.required and column.null_count:
        return None
    if field.type == "string" and pc.any(pc.match_substring(column, "\x00")).as_py():
        return None
    if field.type == "double" and not pc.all(pc.or_kleene(pc.is_finite(column), pc.is_null(column))).as_py():
        return None
    if field.type == "timestamp":
        low, high = -(-storable.MIN_EPOCH_MICROS // micros_per_unit), storable.MAX_EPOCH_MICROS // micros_per_unit
        bounds = pc.min_max(column)
        if column.null_count < len(column) and not low <= bounds["min"].as_py() <= bounds["max"].as_py() <= high:
            return None
        return pc.multiply(column, micros_per_unit).cast(ARROW_TYPES["timestamp"])
    return column
