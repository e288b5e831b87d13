"""A declared `json` field's value: any decoded value as JSON (`jsonable`), and its text for a jsonb column
(`json_text`), held to what jsonb can store.

JSON's own values stay as they are, numbers exact (the reference reads them as int and Decimal). A binary format's
nested value becomes JSON by one mapping for Avro and Protobuf alike: records, messages and maps are objects (map
keys as text), arrays and repeated fields arrays, bytes base64 text, timestamps ISO-8601 text in UTC, dates
ISO-8601 dates, UUIDs their text, decimals exact numbers, enums their symbol's name.

jsonb refuses text with NUL or a lone surrogate, and numbers of more than 131,072 digits before the point or 16,383
after (Postgres numeric); microingest refuses values nested more than MAX_DEPTH deep. Such a value is
`storable.Unstorable`, a dead letter, never a failed batch.
"""

from __future__ import annotations

import base64
import json
import math
import uuid
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import Any

from microingest.decode import storable

MAX_WHOLE_DIGITS, MAX_PLACES = 131_072, 16_383
# Deeper values are refused by a rule of our own, the same on every process, before Python's recursion limit (whose
# reach depends on the stack already in use) could decide.
MAX_DEPTH = 200


def jsonable(value: Any, depth: int = 0) -> Any:
    """The value as JSON's values (dict with text keys, list, str, int, Decimal, float, bool, None)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return storable.text(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise storable.Unstorable(f"holds the number {value}, which JSON cannot")
        return value
    if isinstance(value, Decimal):
        return _number(value)
    if isinstance(value, (dict, list, tuple)) and depth >= MAX_DEPTH:
        raise storable.Unstorable(f"is nested more than {MAX_DEPTH} deep, more than microingest keeps as JSON")
    if isinstance(value, dict):
        return {_key(key): jsonable(item, depth + 1) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item, depth + 1) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime):
        return storable.timestamp(value).astimezone(timezone.utc).isoformat()
    if isinstance(value, (date, uuid.UUID)):
        return str(value)
    raise TypeError(f"expected a JSON value, got {type(value).__name__}")


def json_text(value: Any) -> str:
    """A `jsonable` value's JSON text, numbers written exactly."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, float):
        return "-0" if value == 0 and math.copysign(1, value) < 0 else repr(value)  # JSON's -0, as it was written
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{json_text(v)}" for k, v in value.items()) + "}"
    return "[" + ",".join(json_text(item) for item in value) + "]"


def _key(key: Any) -> str:
    if isinstance(key, bool):  # a Protobuf map's bool keys, as its JSON mapping writes them
        return "true" if key else "false"
    if isinstance(key, (int, str)):
        return storable.text(str(key))
    raise TypeError(f"expected text object keys, got {type(key).__name__}")


def _number(value: Decimal) -> Decimal:
    if not value.is_finite():
        raise storable.Unstorable(f"holds the number {value}, which JSON cannot")
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    if value.adjusted() >= MAX_WHOLE_DIGITS or -exponent > MAX_PLACES:
        raise storable.Unstorable(
            f"holds a number of {max(value.adjusted() + 1, 0)} digit(s) before the point and {max(-exponent, 0)} "
            f"after, beyond Postgres numeric's {MAX_WHOLE_DIGITS:,} and {MAX_PLACES:,}"
        )
    return value
