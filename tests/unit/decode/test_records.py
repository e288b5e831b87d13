"""Every class of bad record ends as a BadRecord with a readable reason, or is handled as the sink mode defines."""

import pytest

from microingest.declare.validate import parse_pipeline
from microingest.decode.records import BadRecord, RecordProcessor

BASE = {
    "name": "p",
    "topic": "t",
    "target_table": "t",
    "schema": {"id": {"type": "string", "required": True}, "n": "integer", "amount": "double"},
}


def processor(**changes):
    return RecordProcessor(parse_pipeline({**BASE, **changes}))


@pytest.mark.parametrize(
    "key, value, error_class, reason",
    [
        (b"k", b"\xc3\x28 not utf-8", "invalid_utf8", "not valid UTF-8"),
        (b"k", b'{"id": "a", "n": 1', "invalid_json", "not valid JSON"),
        (b"k", b'"just a string"', "not_an_object", "must be a JSON object"),
        (b"k", b'{"id": "a", "n": "seven"}', "wrong_type", "field 'n' \\(integer\\)"),
        (b"k", b'{"n": 3}', "missing_field", "field 'id' is required but missing"),
        (b"k", b'{"id": "a", "pad": "' + b"x" * 2048 + b'"}', "value_too_large", "more than max_value_bytes 1024"),
        (b"k", None, "tombstone", "tombstone"),
        (b"k", b"[" * 50_000 + b"]" * 50_000, "invalid_json", "nested too deeply|not valid JSON"),
        (b"k", b'{"id": "a", "big": ' + b"7" * 5000 + b"}", "invalid_json", "could not be decoded as JSON"),
    ],
)
def test_bad_values_in_append_mode(key, value, error_class, reason):
    with pytest.raises(BadRecord, match=reason) as err:
        processor(max_value_bytes=1024 if error_class == "value_too_large" else 1_000_000).process(key, value)
    assert err.value.error_class == error_class


def test_null_key_is_fine_for_append_but_not_for_upsert():
    assert processor().process(None, b'{"id": "a"}') == (None, False, "a", None, None)
    with pytest.raises(BadRecord, match="record key is null") as err:
        processor(sink_mode="upsert_latest").process(None, b'{"id": "a"}')
    assert err.value.error_class == "null_key"


def test_tombstone_in_upsert_mode_is_a_deletion_of_its_key():
    assert processor(sink_mode="upsert_latest").process(b"dev-1", None) == ("dev-1", True, None, None, None)


def test_key_that_is_not_text_is_kept_in_its_escaped_form_in_every_mode():
    for mode in ("append", "upsert_latest"):
        assert processor(sink_mode=mode).process(b"\xff\x00", b'{"id": "a"}')[0] == "\\xff00"


def test_schema_valid_record_failing_the_transform():
    p = processor(transform="microingest.transforms:require_positive_amount")
    assert p.process(b"k", b'{"id": "a", "amount": 2.5}') == ("k", False, "a", None, 2.5)
    with pytest.raises(
        BadRecord,
        match=r"transform microingest.transforms:require_positive_amount failed: "
        "ValueError: amount must be positive, got -1.0",
    ) as err:
        p.process(b"k", b'{"id": "a", "amount": -1}')
    assert err.value.error_class == "transform_failed"


def test_transform_output_is_validated_against_the_schema():
    p = processor(transform="microingest.transforms:drop_all_fields")
    with pytest.raises(BadRecord, match="field 'id' is required but missing") as err:
        p.process(b"k", b'{"id": "a"}')
    assert err.value.error_class == "transform_failed"


def test_extra_fields_are_ignored():
    assert processor().process(b"k", b'{"id": "a", "unexpected": {"deep": [1]}}') == ("k", False, "a", None, None)
