"""What a transform_sql statement gives a declared decimal or json field, held to the reference decoder's own rules
(`converters.convert`), so a value lands exactly as it would had the record carried it: a decimal (or each of an
array's) from its exact
value (a decimal's digits, a double's binary value, decimal text) at the declared scale, refused or rounded half to
even as the declaration says, never by Spark's half-up cast; json text read as the decoder reads a record's JSON
(numbers exact) and held to what jsonb stores. Pure: `spark.sql_transform` calls it from a Python UDF on the
executors, one value at a time, where the batch is not decoded in the JVM or the JVM's own held function (HeldValueUdf,
tests/integration/spark/test_held_in_jvm.py) left one of its values, which then names the refusals.
"""

from __future__ import annotations

import json
from decimal import InvalidOperation
from typing import Any

from microingest.declare.pipeline import Field
from microingest.decode import converters, json_values
from microingest.decode.codec import read_json

LANDS, REFUSED = "ok:", "no:"  # what `held` answers begins with


def holds(field: Field) -> bool:
    """A decimal, an array of decimals or a json field: whose values Spark's casts would not hold as the decoder."""
    return field.kind == "decimal" or field.type == "json"


def held(field: Field, value: Any) -> str | None:
    """None for None; else LANDS and the value's staged text (a decimal at its scale, a json value's text), or
    REFUSED and why, in the decoder's words."""
    if value is None:
        return None
    try:
        if field.type == "json":
            if not isinstance(value, str):
                raise TypeError(f"expected JSON text, got {type(value).__name__}")
            document = _document(value)
            if document is None:  # JSON's null, as the decoder reads a field holding it: no value
                return None
            return LANDS + json_values.json_text(converters.convert(field, document))
        converted = converters.convert(field, value)
        if field.type == "array":  # JSON's array of the decimals, each at its scale
            return LANDS + "[" + ",".join("null" if d is None else format(d, "f") for d in converted) + "]"
        return LANDS + format(converted, "f")
    except (TypeError, ValueError) as exc:  # storable.Unstorable is a ValueError
        return REFUSED + str(exc)


def _document(text: str) -> Any:
    try:
        return read_json(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"text that is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None
    except InvalidOperation:  # as the decoder reads a record holding it (`codec`): never a failed query
        raise ValueError("JSON holding a number whose exponent is out of range") from None
