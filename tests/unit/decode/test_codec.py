from datetime import datetime, timezone

import pytest

from microingest.declare.pipeline import Field
from microingest.decode.codec import DecodeError, copy_text_row, decode_json

SCHEMA = (
    Field("id", "string", True),
    Field("n", "integer"),
    Field("x", "double"),
    Field("ok", "boolean"),
    Field("at", "timestamp"),
)


def test_decodes_all_types_in_schema_order():
    value = b'{"at": "2026-01-02T03:04:05Z", "ok": true, "x": 1, "n": 5.0, "id": "a", "extra": 1}'
    assert decode_json(value, SCHEMA) == ("a", 5, 1.0, True, datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))


def test_optional_fields_may_be_missing_or_null():
    assert decode_json(b'{"id": "a", "n": null}', SCHEMA) == ("a", None, None, None, None)


def test_epoch_millis_and_naive_timestamps_are_utc():
    assert decode_json(b'{"id": "a", "at": 1000}', SCHEMA)[4] == datetime(1970, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    assert decode_json(b'{"id": "a", "at": "2026-01-01T00:00:00"}', SCHEMA)[4].tzinfo == timezone.utc


@pytest.mark.parametrize(
    "value, reason",
    [
        (None, "tombstone"),
        (b"\xff\xfe", "not valid UTF-8"),
        (b'{"id": "a"', "not valid JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"n": 1}', "field 'id' is required but missing"),
        (b'{"id": null}', "field 'id' is required but null"),
        (b'{"id": 5}', "field 'id' \\(string\\): expected a string"),
        (b'{"id": "a", "n": 1.5}', "field 'n' \\(integer\\)"),
        (b'{"id": "a", "n": true}', "field 'n' \\(integer\\)"),
        (b'{"id": "a", "n": 99999999999999999999}', "does not fit in 64 bits"),
        (b'{"id": "a", "ok": "yes"}', "field 'ok' \\(boolean\\)"),
        (b'{"id": "a", "at": "yesterday"}', "field 'at' \\(timestamp\\)"),
        (b'{"id": "a\\u0000b"}', "NUL"),
        (b'{"id": "a", "amount": 0e1000000000000000000}', "exponent is out of range"),
        (b'{"id": "a", "x": [-1e-2000000000000000000]}', "exponent is out of range"),
    ],
)
def test_bad_values_are_rejected_with_a_reason(value, reason):
    with pytest.raises(DecodeError, match=reason):
        decode_json(value, SCHEMA)


def test_copy_text_escapes_what_copy_would_misread():
    assert copy_text_row(["a\tb\nc\\d", None, True, 1.5, 3]) == "a\\tb\\nc\\\\d\t\\N\tt\t1.5\t3\n"


def test_copy_text_of_every_kind_of_value():
    at = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=timezone.utc)
    assert copy_text_row(["plain", "cr\r", False, at, b"\x00\xff", {"k": "a\tb"}, [1], 2**63 - 1, -0.0]) == (
        'plain\tcr\\r\tf\t2026-01-02T03:04:05.600000+00:00\t\\\\x00ff\t{"k": "a\\\\tb"}\t[1]\t9223372036854775807'
        "\t-0.0\n"
    )


@pytest.mark.parametrize(
    "token, expected",
    [
        ("9007199254740993.0", 9007199254740993),
        ("9223372036854775807.000", 2**63 - 1),
        ("1E2", 100),
        ("-0", 0),
        ("-0.0e0", 0),
        ("1.0e-0", 1),
        ("12345678901234567000e-3", 12345678901234567),
    ],
)
def test_an_integer_field_takes_exactly_the_number_written(token, expected):
    got = decode_json(b'{"id": "a", "n": ' + token.encode() + b"}", SCHEMA)[1]
    assert type(got) is int and got == expected


@pytest.mark.parametrize(
    "token, reason",
    [
        ("12345678901234567.89", "wrong_type"),
        ("9007199254740993.5", "wrong_type"),
        ("1e-999999999", "wrong_type"),
        ("9223372036854775808.0", "unstorable"),
        ("1e999999999", "unstorable"),
    ],
)
def test_a_number_an_integer_field_cannot_hold_exactly_is_refused_never_rounded(token, reason):
    with pytest.raises(DecodeError) as refused:
        decode_json(b'{"id": "a", "n": ' + token.encode() + b"}", SCHEMA)
    assert refused.value.error_class == reason


@pytest.mark.parametrize(
    "token, expected",
    [
        ("-0", -0.0),
        ("-0.0e0", -0.0),
        ("0", 0.0),
        ("1E2", 100.0),
        ("9007199254740993", 9007199254740992.0),
        ("0.1", 0.1),
        ("-1e-400", -0.0),
        ("2.4e-324", 0.0),
        ("2.5e-324", 5e-324),
    ],
)
def test_a_double_field_takes_the_nearest_double_with_its_sign(token, expected):
    got = decode_json(b'{"id": "a", "x": ' + token.encode() + b"}", SCHEMA)[2]
    assert repr(got) == repr(expected)


def test_epoch_millis_with_a_fraction_keep_every_digit():
    got = decode_json(b'{"id": "a", "at": 253402300799999.0}', SCHEMA)[4]
    assert got == datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=timezone.utc)
