"""One Kafka record -> one staged row, or a `BadRecord` saying why it belongs in the dead-letter table.

Pure Python, run on Spark executors and in unit tests alike. Only deterministic problems (the same bytes would fail
again on retry) become dead letters; anything else propagates and fails the batch, which commits nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from microingest.declare.pipeline import Pipeline
from microingest.decode.codec import DecodeError, decode_json, fields_from_object
from microingest.decode.keys import key_decoder
from microingest.decode.record_fields import Headers, record_field
from microingest.decode.registered import required

# error_class values of microingest.dead_letters
TOMBSTONE = "tombstone"
NULL_KEY = "null_key"
VALUE_TOO_LARGE = "value_too_large"
TRANSFORM_FAILED = "transform_failed"


class BadRecord(ValueError):
    def __init__(self, error_class: str, message: str):
        self.error_class = error_class
        super().__init__(message)


def load_transform(spec: str | None) -> Callable[[dict], dict] | None:
    """'package.module:function' -> the function; it gets the decoded fields as a dict and returns them changed."""
    if not spec:
        return None
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


class RecordProcessor:
    """Turns (key, value) into (record_key, is_tombstone, *value columns) for the pipeline's staging table."""

    def __init__(self, pipeline: Pipeline, registry: dict[str, str] | None = None):
        """`registry`: the schema registry client settings, for a pipeline whose values are framed."""
        self.pipeline = pipeline
        self.registry = registry
        self.schema = pipeline.schema
        self.names = pipeline.value_columns
        self._value_fields = pipeline.value_fields
        # where each declared field's value is: its index among the value's fields, or the field (from the record)
        self._places = tuple(self._value_fields.index(f) if f.source == "value" else f for f in self.schema)
        self._by_name = tuple(replace(f, path=()) for f in self.schema)  # a transform's output is keyed by column
        self.transform = load_transform(pipeline.transform)
        self.keyed = pipeline.sink_mode == "upsert_latest"
        # chosen once: process() runs for every record
        self._decoded = self._value_decoder()
        self._key_text = key_decoder(pipeline.key_format, registry)

    def process(self, key: bytes | None, value: bytes | None, headers: Headers = ()) -> tuple[Any, ...]:
        """`headers`: the record's (name, value) pairs, needed where fields come from them."""
        record_key = self._key(key)
        if value is None:
            if self.keyed:
                return (record_key, True) + (None,) * len(self.names)
            raise BadRecord(
                TOMBSTONE, f"value is null (tombstone); sink mode {self.pipeline.sink_mode} has no use for deletions"
            )
        if len(value) > self.pipeline.max_value_bytes:
            raise BadRecord(
                VALUE_TOO_LARGE,
                f"value is {len(value)} bytes, more than max_value_bytes {self.pipeline.max_value_bytes}",
            )
        try:
            values = self._decoded(value)
            if len(self._value_fields) != len(self.schema):
                values = tuple(
                    values[place] if isinstance(place, int) else record_field(place, key, record_key, headers)
                    for place in self._places
                )
        except DecodeError as exc:
            raise BadRecord(exc.error_class, str(exc)) from None
        if self.transform is not None:
            values = self._transformed(self.transform, values)
        return (record_key, False) + values

    def _value_decoder(self) -> Callable[[bytes], tuple[Any, ...]]:
        """value bytes -> the declared fields, typed, for the pipeline's value format."""
        fmt, schema = self.pipeline.value_format, self._value_fields
        # Each format's decoder (fastavro, protobuf) is loaded only by the pipelines that read that format.
        if fmt == "avro":
            from microingest.decode.avro import decode_avro

            avro_registry = required(self.registry, fmt)
            return lambda value: fields_from_object(decode_avro(value, avro_registry), schema)
        if fmt == "protobuf":
            from microingest.decode.protobuf import decode_protobuf

            proto_registry = required(self.registry, fmt)
            heads = tuple(dict.fromkeys(f.at[0] for f in schema))
            return lambda value: fields_from_object(decode_protobuf(value, proto_registry, heads), schema)
        if fmt == "json_schema":  # the frame names a JSON Schema; the JSON is read as ever
            from microingest.decode.registered import framed

            json_registry = required(self.registry, fmt)
            return lambda value: decode_json(framed(value, json_registry, "JSON")[1], schema)
        return lambda value: decode_json(value, schema)

    def _key(self, key: bytes | None) -> str | None:
        if key is None:
            if self.keyed:
                raise BadRecord(NULL_KEY, "record key is null; upsert_latest needs a key to know which row to update")
            return None
        try:
            return self._key_text(key)
        except DecodeError as exc:
            raise BadRecord(exc.error_class, str(exc)) from None

    def _transformed(self, transform: Callable[[dict], dict], values: tuple) -> tuple:
        try:
            out = transform(dict(zip(self.names, values)))
            if not isinstance(out, dict):
                raise TypeError(f"transform returned {type(out).__name__}, not a dict")
            coerced = fields_from_object(out, self._by_name)
        except Exception as exc:  # a transform is user code: any exception it raises is this record's problem
            raise BadRecord(
                TRANSFORM_FAILED, f"transform {self.pipeline.transform} failed: {type(exc).__name__}: {exc}"
            ) from None
        return coerced
