"""The check both whole-batch decoders' tests make: whatever a whole-batch decoder takes, each record's staged
values are exactly those of the reference (RecordProcessor, record by record), type and sign of zero included."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest

from microingest.decode.records import BadRecord, RecordProcessor


def same(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):  # an array's items
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and math.copysign(1, a) == math.copysign(1, b) and a == b
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a.as_tuple() == b.as_tuple()  # the same digits at the same scale
    return type(a) is type(b) and a == b


def rows_as_reference(got, records: list[tuple], reference: RecordProcessor) -> list[tuple] | None:
    """The rows of a whole-batch decoder's columns `got` (None: it declined) for these (key, value) records, after
    asserting the reference stages each record with the same values."""
    if got is None:
        return None
    rows = list(zip(*(column.to_pylist() for column in got)))
    for (key, value), row in zip(records, rows, strict=True):
        try:
            expected = reference.process(key, value)
        except BadRecord as exc:
            pytest.fail(f"the batch decoder took {value!r}, which the reference refuses: {exc}")
        assert all(same(a, b) for a, b in zip(row, expected, strict=True)), (value, row, expected)
    return rows
