"""Record key bytes -> the key text an upsert_latest target is keyed by, per the declaration's `key_format`.

- string (the default): the key's UTF-8 text, or its bytes in hex when that is not storable (`storable.key_text`);
- avro, protobuf, json_schema: framed like values (magic byte, the writer schema's id), decoded with the writer
  schema; a primitive key is its text (`42`, `abc`), a record or message its fields as compact JSON with sorted
  names, so that the same logical key is the same text whichever producer wrote it.

A key that does not decode is the record's problem: a dead letter with its reason, like a value that does not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from microingest.decode import storable
from microingest.decode.codec import DecodeError
from microingest.decode.registered import required

KEY = "key"  # the `part` named in decode errors


def key_decoder(key_format: str, registry: dict[str, str] | None) -> Callable[[bytes], str]:
    # Each format's decoder (fastavro, protobuf) is loaded only by the pipelines whose keys are in that format.
    if key_format == "avro":
        from microingest.decode.avro import decode_avro_datum, plain

        avro_registry = required(registry, key_format)
        return lambda key: key_text_of(plain(decode_avro_datum(key, avro_registry, KEY)[0]))
    if key_format == "protobuf":
        from google.protobuf.json_format import MessageToDict

        from microingest.decode.protobuf import decode_protobuf_message

        proto_registry = required(registry, key_format)
        return lambda key: key_text_of(
            MessageToDict(decode_protobuf_message(key, proto_registry, KEY)[0], preserving_proto_field_name=True)
        )
    if key_format == "json_schema":
        from microingest.decode.registered import framed

        json_registry = required(registry, key_format)
        return lambda key: key_text_of(_json(framed(key, json_registry, "JSON", KEY)[1]))
    return lambda key: storable.key_text(bytes(key))


def key_text_of(datum: Any) -> str:
    """A decoded key as text: one-to-one for keys of one writer schema, always storable."""
    if isinstance(datum, str):
        return storable.key_text(datum.encode("utf-8", "surrogatepass"))
    if isinstance(datum, (bytes, bytearray, memoryview)):
        return storable.key_text(bytes(datum))
    # ensure_ascii: NUL and lone surrogates come out escaped, so any text a key holds can be stored
    return json.dumps(datum, sort_keys=True, separators=(",", ":"), default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return storable.key_text(bytes(value))
    return str(value)  # datetimes, decimals, UUIDs of logical types


def _json(payload: memoryview) -> Any:
    try:
        return json.loads(bytes(payload))
    except (ValueError, RecursionError) as exc:
        raise DecodeError("invalid_json", f"key is not valid JSON: {exc}") from None
