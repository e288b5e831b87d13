"""The payload types beyond the flat five (decimal, date, uuid, bytes, json, arrays) and nested paths, as the
reference decoder reads them from JSON: each value exactly, each way to fail a dead letter naming the field and the
type."""

from __future__ import annotations

import json
import uuid
from datetime import date
from decimal import Decimal

import pytest

from microingest.declare.pipeline import Field
from microingest.decode.codec import DecodeError, decode_json
from microingest.decode.converters import convert
from microingest.decode.json_values import MAX_DEPTH, json_text

MONEY = Field("total", "decimal", precision=19, scale=2)
ROUNDED = Field("total", "decimal", precision=5, scale=2, rounding="half_even")


def one(field: Field, text: str):
    return decode_json(f'{{"{field.at[0]}": {text}}}'.encode(), [field])[0]


def refused(field: Field, text: str) -> DecodeError:
    with pytest.raises(DecodeError) as err:
        one(field, text)
    return err.value


@pytest.mark.parametrize(
    "text, exact",
    [
        ("12345678901234567.89", "12345678901234567.89"),  # a float would have lost the cents
        ("1234.5", "1234.50"),
        ("1234.500", "1234.50"),  # trailing zeros add no digits
        ("-0.01", "-0.01"),
        ("-0", "0.00"),
        ("7", "7.00"),
        ("1e3", "1000.00"),
        ('"1234.50"', "1234.50"),  # decimal text
        ('"-.5"', "-0.50"),
    ],
)
def test_a_decimal_is_its_text_digit_for_digit(text, exact):
    value = one(MONEY, text)
    assert isinstance(value, Decimal) and str(value) == exact


@pytest.mark.parametrize(
    "text, words",
    [
        ("1.005", "has 3 digit(s) after the point; decimal(19,2) holds 17 digit(s) before the point and 2 after"),
        ("123456789012345678", "has 18 digit(s) before the point"),
        ('"1,5"', "expected decimal text such as 1234.50"),
        ('"NaN"', "expected decimal text"),
        ("true", "expected a decimal number or decimal text, got bool"),
        ("[1]", "got list"),
    ],
)
def test_a_decimal_that_does_not_fit_is_a_wrong_type_dead_letter(text, words):
    err = refused(MONEY, text)
    assert err.error_class == "wrong_type"
    assert str(err).startswith("field 'total' (decimal(19,2)): ") and words in str(err)


@pytest.mark.parametrize(
    "text, rounded",
    [("0.125", "0.12"), ("0.135", "0.14"), ("-0.125", "-0.12"), ("1e-999", "0.00"), ("-0.001", "0.00")],
)
def test_rounding_half_even_rounds_once_to_the_scale(text, rounded):
    assert str(one(ROUNDED, text)) == rounded


def test_rounding_up_past_the_precision_is_refused():
    assert "rounds to 1000.00, which has too many digits" in str(refused(ROUNDED, "999.995"))


def test_a_float_is_taken_at_its_exact_binary_value():
    with pytest.raises(ValueError, match="digit"):
        convert(MONEY, 0.1)
    assert convert(ROUNDED, 0.1) == Decimal("0.10")
    assert convert(MONEY, 2.5) == Decimal("2.50")


def test_dates_are_iso_calendar_dates():
    day = Field("d", "date")
    assert one(day, '"2026-11-27"') == date(2026, 11, 27)
    assert one(day, '"0001-01-01"') == date(1, 1, 1)
    for text, words in [
        ('"2026-02-30"', "day is out of range"),
        ('"20261127"', "expected an ISO-8601 date (YYYY-MM-DD)"),
        ('"2026-11-27T10:00:00Z"', "expected an ISO-8601 date"),
        ("20261127", "got int"),
    ]:
        err = refused(day, text)
        assert err.error_class == "wrong_type" and words in str(err), str(err)


def test_uuids_are_hex_text_with_or_without_hyphens():
    field = Field("id", "uuid")
    known = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    assert one(field, '"123e4567-e89b-12d3-a456-426614174000"') == known
    assert one(field, '"123E4567E89B12D3A456426614174000"') == known
    for text in ('"{123e4567-e89b-12d3-a456-426614174000}"', '"123e4567-e89b12d3-a456-426614174000"', '"x"', "1"):
        assert refused(field, text).error_class == "wrong_type"


def test_bytes_are_standard_base64_in_json():
    field = Field("b", "bytes")
    assert one(field, '"AP8="') == b"\x00\xff"
    assert one(field, '""') == b""
    for text in ('"AP8"', '"A P8="', '"AP-_"', "5"):
        assert refused(field, text).error_class == "wrong_type", text


def test_a_json_field_keeps_any_value_whole_and_exact():
    field = Field("doc", "json")
    doc = '{"a": 1.50, "b": [1, "x\\n\\u00e9", null, true, -0], "c": {"d": 12345678901234567890.123456789}}'
    kept = one(field, doc)
    assert json.loads(json_text(kept), parse_float=Decimal) == json.loads(doc, parse_float=Decimal)
    assert "12345678901234567890.123456789" in json_text(kept) and "1.50" in json_text(kept)
    assert json_text(one(field, '"text"')) == '"text"'
    assert json_text(one(field, "[]")) == "[]"


@pytest.mark.parametrize(
    "text, words",
    [
        ('{"a": "\\u0000"}', "NUL"),
        ('["\\ud800"]', "lone surrogate"),
        ("1e131072", "beyond Postgres numeric"),
        ("1e-16384", "beyond Postgres numeric"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} deep"),
    ],
)
def test_a_json_value_jsonb_cannot_store_is_an_unstorable_dead_letter(text, words):
    err = refused(Field("doc", "json"), text)
    assert err.error_class == "unstorable" and words in str(err), str(err)


def test_arrays_convert_element_by_element():
    tags = Field("tags", "array", items="string")
    assert one(tags, '["a", null, ""]') == ["a", None, ""]
    assert one(tags, "[]") == []
    amounts = Field("amounts", "array", items="decimal", precision=6, scale=2)
    assert one(amounts, '[1.5, "2.25"]') == [Decimal("1.50"), Decimal("2.25")]
    err = refused(tags, '["a", 5]')
    assert str(err) == "field 'tags' (array of string): element 1: expected a string, got int"
    assert refused(tags, '"a"').error_class == "wrong_type"
    assert refused(tags, '["a\\u0000"]').error_class == "unstorable"


def test_paths_reach_into_objects_and_arrays():
    doc = b'{"customer": {"id": "c-1", "tier": null}, "items": [{"sku": "A"}, {"sku": "B"}]}'
    fields = [
        Field("customer_id", "string", required=True, path=("customer", "id")),
        Field("second_sku", "string", path=("items", "1", "sku")),
        Field("third_sku", "string", path=("items", "2", "sku")),
        Field("tier", "string", path=("customer", "tier")),
        Field("region", "string", path=("customer", "address", "region")),
    ]
    assert decode_json(doc, fields) == ("c-1", "B", None, None, None)


def test_a_path_that_fails_names_the_field_and_the_place():
    required = Field("customer_id", "string", required=True, path=("customer", "id"))
    with pytest.raises(DecodeError) as err:
        decode_json(b'{"customer": {}}', [required])
    assert (err.value.error_class, str(err.value)) == (
        "missing_field",
        "field 'customer_id' (at customer.id) is required but missing",
    )
    with pytest.raises(DecodeError) as err:
        decode_json(b'{"customer": "c-1"}', [required])
    assert (err.value.error_class, str(err.value)) == (
        "wrong_type",
        "field 'customer_id' (at customer.id) (string): customer is str, not an object",
    )


@pytest.mark.parametrize(
    "field, value",
    [
        (MONEY, Decimal("12.3")),
        (Field("d", "date"), "2026-11-27"),
        (Field("u", "uuid"), "123e4567-e89b-12d3-a456-426614174000"),
        (Field("b", "bytes"), "AP8="),
        (Field("j", "json"), {"a": [Decimal("1.5"), b"\x00", date(2026, 1, 1)]}),
        (Field("a", "array", items="date"), ["2026-11-27", None]),
    ],
)
def test_a_converted_value_converts_to_itself(field, value):
    """A transform's output goes through the same converters: a value it passes on unchanged must land unchanged."""
    once = convert(field, value)
    assert convert(field, once) == once


def test_fields_from_the_key_and_headers_take_their_place_among_the_value_fields():
    from microingest.declare.validate import parse_pipeline
    from microingest.decode.records import BadRecord, RecordProcessor

    pipeline = parse_pipeline(
        {
            "name": "p",
            "topic": "t",
            "target_table": "public.p",
            "schema": {
                "order_key": {"from": "key"},
                "id": "string",
                "trace_id": {"from": "header", "name": "trace", "required": True},
                "raw_key": {"from": "key", "type": "bytes"},
                "blob": {"from": "header", "name": "blob", "type": "bytes"},
                "customer_id": {"type": "string", "path": "customer.id"},
            },
        }
    )
    processor = RecordProcessor(pipeline)
    headers = [("trace", b"old"), ("blob", b"\x00\xff"), ("trace", "t-\u00e9".encode())]
    value = b'{"id": "o-1", "customer": {"id": "c-1"}}'
    assert processor.process(b"k\xff", value, headers) == (
        "\\x6bff",  # the staged record key: not UTF-8, so its bytes in hex
        False,
        "\\x6bff",
        "o-1",
        "t-\u00e9",  # the last header of the name
        b"k\xff",
        b"\x00\xff",
        "c-1",
    )
    assert processor.process(None, value, [("trace", b"t")])[2:] == (None, "o-1", "t", None, None, "c-1")
    for headers, error_class, message in [
        (
            [("blob", b"x")],
            "missing_field",
            "field 'trace_id' (from header) is required but the record has no header 'trace', or it is null",
        ),
        ([("trace", None)], "missing_field", None),
        (
            [("trace", b"\xff")],
            "wrong_type",
            "field 'trace_id' (string, from header 'trace'): not UTF-8 text: invalid start byte at byte 0",
        ),
        ([("trace", b"a\x00")], "unstorable", None),
    ]:
        with pytest.raises(BadRecord) as err:
            processor.process(b"k", value, headers)
        assert err.value.error_class == error_class
        assert message is None or str(err.value) == message


def test_a_transform_sees_every_column_by_name_and_its_output_is_read_by_name():
    from microingest.declare.validate import parse_pipeline
    from microingest.decode.records import RecordProcessor

    pipeline = parse_pipeline(
        {
            "name": "p",
            "topic": "t",
            "target_table": "public.p",
            "transform": "test_payload_values:_doubled",
            "schema": {
                "customer_id": {"type": "string", "path": "customer.id"},
                "total": {"type": "decimal", "precision": 6, "scale": 2},
                "order_key": {"from": "key"},
            },
        }
    )
    out = RecordProcessor(pipeline).process(b"k", b'{"customer": {"id": "c"}, "total": 1.25}')
    assert out == ("k", False, "c!", Decimal("2.50"), "k")


def _doubled(fields: dict) -> dict:
    assert fields == {"customer_id": "c", "total": Decimal("1.25"), "order_key": "k"}
    return {**fields, "customer_id": fields["customer_id"] + "!", "total": fields["total"] * 2}


def test_arrays_of_timestamps_and_uuids_are_written_in_postgres_binary_array_form():
    """array_send's layout, which array_recv reads back: the encoder would mark their elements with other types."""
    import struct
    from datetime import datetime, timezone

    from microingest.decode.batch_columns import pg_array

    at = datetime(2000, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    assert pg_array("timestamp", [at, None]) == (
        struct.pack(">iiIii", 1, 1, 1184, 2, 1) + struct.pack(">iq", 8, 1_000_000) + struct.pack(">i", -1)
    )
    known = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    assert pg_array("uuid", [known]) == struct.pack(">iiIii", 1, 0, 2950, 1, 1) + struct.pack(">i", 16) + known.bytes
    assert pg_array("uuid", []) == struct.pack(">iiI", 0, 0, 2950)


@pytest.mark.parametrize("text", ["0.0000", "0.00", "-0.000", "0E-4", "0e5"])
def test_a_decimal_zero_fits_whatever_its_written_places(text):
    assert str(one(Field("z", "decimal", precision=10, scale=0), text)) == "0"
    assert str(one(MONEY, text)) == "0.00"


def test_a_path_step_indexes_an_array_only_with_ascii_digits():
    field = Field("x", "string", path=("items", "\u00b2"))
    with pytest.raises(DecodeError) as err:
        decode_json(b'{"items": ["a", "b", "c"]}', [field])
    assert err.value.error_class == "wrong_type" and "items is list, not an object" in str(err.value)


def test_json_negative_zero_is_written_as_json_wrote_it():
    assert json_text(one(Field("doc", "json"), '{"a": -0, "b": -0.0, "c": 0}')) == '{"a":-0,"b":-0.0,"c":0}'


def test_base64_with_stray_bits_is_refused():
    assert one(Field("b", "bytes"), '"AQ=="') == b"\x01"
    assert "stray bits" in str(refused(Field("b", "bytes"), '"AR=="'))


def test_an_avro_record_nested_deeper_than_python_recurses_is_made_plain():
    from microingest.decode.avro import plain

    deep: dict = {"id": uuid.UUID(int=1)}
    for _ in range(5000):
        deep = {"next": deep, "id": uuid.UUID(int=2)}
    made = plain(deep)
    node = made
    while "next" in node:
        assert node["id"] == "00000000-0000-0000-0000-000000000002"
        node = node["next"]
    assert node["id"] == "00000000-0000-0000-0000-000000000001"
