"""Decoded record keys as the text an upsert_latest target is keyed by."""

from datetime import datetime, timezone

import pytest

from microingest.declare.pipeline import Field, Pipeline
from microingest.decode.keys import key_decoder, key_text_of
from microingest.decode.records import BadRecord, RecordProcessor


def test_primitive_keys_are_their_text_records_compact_json_with_sorted_names():
    assert key_text_of("device-7") == "device-7"
    assert key_text_of(42) == "42" and key_text_of(True) == "true" and key_text_of(None) == "null"
    assert key_text_of({"site": "b", "id": 7}) == '{"id":7,"site":"b"}' == key_text_of({"id": 7, "site": "b"})
    at = datetime(2026, 11, 24, tzinfo=timezone.utc)
    assert key_text_of({"at": at, "raw": b"\x00\x01"}) == '{"at":"2026-11-24 00:00:00+00:00","raw":"\\\\x0001"}'


def test_keys_text_is_always_storable():
    assert key_text_of("a\x00b") == "\\x" + b"a\x00b".hex()  # the escaped form, as for string keys
    assert key_text_of("\ud800") == "\\x" + "\ud800".encode("utf-8", "surrogatepass").hex()
    assert key_text_of({"k": "a\x00\ud800"}) == '{"k":"a\\u0000\\ud800"}'


def test_string_keys_are_staged_as_ever():
    decode = key_decoder("string", None)
    assert decode(b"k1") == "k1" and decode(b"\xff") == "\\xff"


def test_a_framed_key_that_is_not_framed_is_a_dead_letter_naming_the_key():
    pipeline = Pipeline("p", "t", "public.p", (Field("v", "string"),), sink_mode="upsert_latest", key_format="avro")
    processor = RecordProcessor(pipeline, {"url": "http://127.0.0.1:9"})  # never asked: the frame is wrong first
    with pytest.raises(BadRecord) as bad:
        processor.process(b"plain-key", b'{"v": "x"}')
    assert bad.value.error_class == "not_framed"
    assert str(bad.value).startswith("key is not in the Confluent wire format")
