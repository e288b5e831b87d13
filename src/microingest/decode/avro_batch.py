"""Decode a whole Arrow batch of Confluent-framed Avro values at once into typed Arrow columns, or decline.

The reference is `records.RecordProcessor`: record by record, `avro.decode_avro` then `codec.fields_from_object`,
which names the dead letters and their reasons. This decoder reads each value with the same library (fastavro) and the
same writer schema, then builds each declared column in Arrow at once, without the reference's typing of every value
in Python, which is most of its cost. It takes a batch only when it can show that every record in it would come out
of the reference as a staged row with the same values, and declines (returns None) otherwise, so the caller hands that
batch to the reference. It takes it when:

- as `arrow_json`: no transform, every key staged as it is (`batch_columns.staged_keys`), every value present and
  at most `max_value_bytes`;
- every value is framed under a schema id the registry holds, as an Avro record schema without references or arrays
  of zero-byte items (else a dead letter or a refusal, which is the reference's to give);
- each declared field is, in each writer schema of the batch, absent (when optional) or a type the declared one takes
  as it is, alone or in a union with null: string ← string or enum; integer ← int or long; double ← float or double;
  boolean ← boolean; timestamp ← long or int as epoch milliseconds, or long with a (local-)timestamp-millis or -micros
  logical type, read here as the number fastavro would turn into a datetime by exact arithmetic (the batch's writer
  schemas agreeing on its unit). A field given another logical type, or a bytes, fixed, record, array or map, goes
  through the reference, whose `plain` and typing decide;
- every value decodes and ends where its datum ends;
- no declared column breaks a rule Arrow does not check (`batch_columns.checked`): a null in a required field, NUL in
  a string, a double that is not finite, a timestamp outside the years 1 to 9999.

tests/integration/decode/test_avro_batch.py checks this against the reference on generated and mutated records,
under schemas registered in a real registry.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from microingest.declare.pipeline import Pipeline
from microingest.decode.avro_bounds import unbounded_array
from microingest.decode.batch_columns import MICROS_PER_MS, READ_TYPES, checked, staged_keys
from microingest.decode.codec import DecodeError
from microingest.decode.framing import split_frame
from microingest.decode.registered import registered

_TAKEN_AS_IS = {
    "string": ("string",),
    "integer": ("int", "long"),
    "double": ("float", "double"),
    "boolean": ("boolean",),
    "timestamp": ("int", "long"),
}
_TIMESTAMP_UNITS = {
    "timestamp-millis": MICROS_PER_MS,
    "local-timestamp-millis": MICROS_PER_MS,
    "timestamp-micros": 1,
    "local-timestamp-micros": 1,
}


@dataclass(frozen=True)
class _Reading:
    """How to read one writer schema's values for one declaration."""

    parsed: Any  # fastavro's parsed writer schema, the declared timestamps' logical types left out
    units: tuple[int, ...]  # per declared field: µs per unit of a timestamp's number (1 for the other types)


_READINGS: dict[tuple, _Reading | None] = {}


def decode_values(
    keys: pa.Array, values: pa.Array, pipeline: Pipeline, registry: dict[str, str]
) -> list[pa.Array] | None:
    """(record_key, is_tombstone, value columns...) of the staged rows, as RecordProcessor would give them for each
    record, or None when this batch must go through RecordProcessor."""
    record_keys = staged_keys(keys, values, pipeline, "avro")
    if record_keys is None:
        return None
    if pc.max(pc.binary_length(values)).as_py() > pipeline.max_value_bytes:
        return None
    read = _read(values.to_pylist(), pipeline, registry)
    if read is None:
        return None
    records, units = read
    columns = []
    for field, unit, name in zip(pipeline.schema, units, pipeline.value_columns):
        try:
            column = pa.array([record.get(name) for record in records], READ_TYPES[field.type])
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a type check above has missed something: the reference decides
            return None
        column = checked(field, column, unit)
        if column is None:
            return None
        columns.append(column)
    return [record_keys, pc.is_null(values)] + columns


def _read(
    values: list[bytes], pipeline: Pipeline, registry: dict[str, str]
) -> tuple[list[dict], tuple[int, ...]] | None:
    """Each value's writer record and the timestamps' units, or None."""
    from fastavro import schemaless_reader  # imported where records are read: the Spark driver need not load it

    readings: dict[int, _Reading] = {}
    records: list[Any] = []
    for value in values:
        try:
            schema_id, payload = split_frame(value)
        except DecodeError:  # not framed: a dead letter
            return None
        reading = readings.get(schema_id) or _reading(registry, schema_id, pipeline)
        if reading is None:
            return None
        readings[schema_id] = reading
        stream = BytesIO(payload)
        try:
            records.append(schemaless_reader(stream, reading.parsed, None))
        except Exception:  # truncated or corrupt: a dead letter, which is the reference's to name
            return None
        if stream.tell() != len(payload):
            return None
    units = {reading.units for reading in readings.values()}
    return (records, units.pop()) if len(units) == 1 else None


def _reading(registry: dict[str, str], schema_id: int, pipeline: Pipeline) -> _Reading | None:
    """How to read `schema_id`'s values for the pipeline, or None when they need the reference. A schema id the
    registry does not know is not remembered: it may be registered later."""
    key = (registry["url"], registry.get("basic.auth.user.info"), schema_id, pipeline.schema)
    if key not in _READINGS:
        try:
            schema = registered(registry, schema_id)
        except DecodeError:
            return None
        _READINGS[key] = _planned(schema, pipeline)
    return _READINGS[key]


def _planned(schema: Any, pipeline: Pipeline) -> _Reading | None:
    if schema.references or (schema.schema_type or "AVRO") != "AVRO":
        return None
    try:
        writer = json.loads(schema.schema_str)
    except ValueError:
        return None
    if not isinstance(writer, dict) or writer.get("type") != "record" or unbounded_array(writer) is not None:
        return None
    reader = copy.deepcopy(writer)
    fields = {f.get("name"): f for f in reader.get("fields", []) if isinstance(f, dict)}
    units = []
    for declared in pipeline.schema:
        if declared.name not in fields:
            if declared.required:
                return None
            units.append(1)
            continue
        read = _as_is(declared.type, fields[declared.name].get("type"))
        if read is None:
            return None
        fields[declared.name]["type"], unit = read
        units.append(unit)
    import fastavro

    try:
        parsed = fastavro.parse_schema(reader)
    except Exception:  # the reference fails the batch on it, with its reason
        return None
    return _Reading(parsed, tuple(units))


def _as_is(declared: str, avro_type: Any) -> tuple[Any, int] | None:
    """(the field's type with a timestamp's logical type left out, µs per unit), when the declared type takes the
    writer's values as they are."""
    if isinstance(avro_type, list):
        others = [t for t in avro_type if t != "null"]
        if len(others) != 1 or len(avro_type) - len(others) > 1:
            return None
        read = _as_is(declared, others[0])
        return None if read is None else ([read[0] if t != "null" else t for t in avro_type], read[1])
    if isinstance(avro_type, str):
        name, logical = avro_type, None
    elif isinstance(avro_type, dict) and isinstance(avro_type.get("type"), str):
        name, logical = avro_type["type"], avro_type.get("logicalType")
    else:
        return None
    if declared == "string" and name == "enum" and isinstance(avro_type, dict):
        return avro_type, 1
    if name not in _TAKEN_AS_IS[declared]:
        return None
    if logical is None:
        return avro_type, MICROS_PER_MS if declared == "timestamp" else 1
    if declared == "timestamp" and name == "long" and logical in _TIMESTAMP_UNITS:
        return "long", _TIMESTAMP_UNITS[logical]
    return None
