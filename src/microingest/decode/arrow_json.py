"""Decode a whole Arrow batch of JSON record values at once, in Arrow's C++ JSON reader, or decline.

`records.RecordProcessor` decodes record by record in Python and is the reference: it says which records are dead
letters and why. Its per-record cost was about a third of a batch's CPU. This decoder takes a batch only when it can
show that every record in it would come out of the reference as a staged row with the same values, and declines
(returns None) otherwise, so the caller hands that batch to the reference. Declining is always safe; it only costs
speed, so the checks below are conservative:

- no transform (user Python code), every value present (no tombstones), at most `max_value_bytes` and valid UTF-8,
  every key valid UTF-8 without NUL and not beginning with a backslash and x (present, for upsert_latest): staged
  as it is, not in `storable.key_text`'s escaped form;
- every value one line holding one object: no line breaks or BOM, no exponent Python cannot hold, short enough and
  with few enough brackets that
  Python's limits (4,300-digit integers, nesting depth) cannot apply, and Arrow found exactly one row per value;
- Arrow converted every declared field to its declared type without error (it refuses what Python refuses: a number
  for a string, 1.0 for an integer, integers beyond 64 bits, duplicate names, bad escapes and encodings) and no
  value breaks a rule Arrow does not check: required fields present, strings without NUL, finite doubles;
- timestamps only as integer epoch milliseconds of the years 1 to 9999, which the reference converts by integer
  arithmetic too; ISO-8601 text goes to the reference.

tests/unit/decode/test_arrow_json.py checks this against the reference on generated and mutated records.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from microingest.declare.pipeline import Field, Pipeline
from microingest.decode.batch_columns import HUGE_EXPONENT, READ_TYPES, checked, staged_keys, utf8

# Shorter values cannot hold a 4,301-digit integer (Python's int limit); values with fewer brackets cannot nest near
# 1,000 deep (its recursion limit, less the frames already on the stack).
MAX_VALUE_BYTES = 4000
MAX_BRACKETS = 500
_BOM = b"\xef\xbb\xbf"


def decode_values(keys: pa.Array, values: pa.Array, pipeline: Pipeline) -> list[pa.Array] | None:
    """(record_key, is_tombstone, value columns...) of the staged rows, as RecordProcessor would give them for each
    record, or None when this batch must go through RecordProcessor."""
    record_keys = staged_keys(keys, values, pipeline, "json")
    if record_keys is None:
        return None
    if pc.max(pc.binary_length(values)).as_py() > min(pipeline.max_value_bytes, MAX_VALUE_BYTES):
        return None
    if any(pc.any(pc.match_substring(values, marker)).as_py() for marker in (b"\n", b"\r", _BOM)):
        return None
    if pc.any(pc.match_substring_regex(values, HUGE_EXPONENT)).as_py():
        return None
    if utf8(values) is None:
        return None
    brackets = pc.add(pc.count_substring(values, b"["), pc.count_substring(values, b"{"))
    if pc.max(brackets).as_py() >= MAX_BRACKETS:
        return None
    columns = _read(values, pipeline.schema)
    if columns is None:
        return None
    typed = []
    for field, column in zip(pipeline.schema, columns):
        column = checked(field, column)
        if column is None:
            return None
        typed.append(column)
    return [record_keys, pc.is_null(values)] + typed


def _read(values: pa.Array, schema: Sequence[Field]) -> list[pa.Array] | None:
    lines = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values), b"\n")
    arrow_schema = pa.schema([(f.name, READ_TYPES[f.type]) for f in schema])
    try:
        table = pa_json.read_json(
            pa.BufferReader(lines[0].as_buffer()),
            read_options=pa_json.ReadOptions(use_threads=False),
            parse_options=pa_json.ParseOptions(explicit_schema=arrow_schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    # Every value holds an opening brace and none is blank, so each gives at least one row: as many rows as values
    # means one object each, in order.
    if table.num_rows != len(values) or not pc.all(pc.match_substring(values, b"{")).as_py():
        return None
    return [table.column(f.name).combine_chunks() for f in schema]
