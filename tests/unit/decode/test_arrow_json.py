"""The whole-batch decoder against the reference (RecordProcessor, record by record): whenever it takes a batch, each
record's staged values are exactly the reference's; and it does take ordinary batches."""

import json
import random

import pyarrow as pa
import pytest

from helpers.reference_check import rows_as_reference
from microingest.declare.validate import parse_pipeline
from microingest.decode.arrow_json import decode_values
from microingest.decode.records import RecordProcessor

SCHEMA = {
    "id": {"type": "string", "required": True},
    "n": "integer",
    "amount": "double",
    "ok": "boolean",
    "at": "timestamp",
    "note": "string",
}


def pipeline(**changes):
    return parse_pipeline({"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, **changes})


def decoded_or_none(p, records):
    """decode_values on these (key, value) records: their rows, checked against the reference, or None."""
    got = decode_values(
        pa.array([k for k, _ in records], pa.binary()), pa.array([v for _, v in records], pa.binary()), p
    )
    return rows_as_reference(got, records, RecordProcessor(p))


ODD_FIELD_VALUES = [
    "1.0",
    "1e5",
    "-0",
    "-0.0",
    "0.1",
    "1e-400",
    "1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    str(2**63 - 1),
    str(-(2**63)),
    str(2**63),
    str(2**64),
    "true",
    "false",
    "null",
    '""',
    '"x"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\t\\n\\"\\\\"',
    '"\u00e9\u4e2d"',
    '"2024-01-01T00:00:00"',
    '"2024-01-01"',
    "[]",
    "{}",
    '[1, {"a": 2}]',
    "4000000000000",
    "-4000000000000",
    "3999999999999",
    "1700000000123",
    "123456789012345678",
]


def random_value(rng: random.Random) -> bytes:
    doc = {}
    for name, spec in SCHEMA.items():
        kind = spec["type"] if isinstance(spec, dict) else spec
        roll = rng.random()
        if roll < 0.08:
            continue  # missing
        if roll < 0.25:
            doc[name] = json.loads(rng.choice(ODD_FIELD_VALUES)) if rng.random() < 0.5 else None
            continue
        doc[name] = {
            "string": lambda: "".join(rng.choice('ab\u00e9"\\\t ') for _ in range(rng.randrange(6))),
            "integer": lambda: rng.randrange(-(2**63), 2**63),
            "double": lambda: rng.choice(
                [
                    rng.uniform(-1e9, 1e9),
                    rng.random(),
                    float(rng.randrange(10**6)),
                    -0.0,
                    5e-324,
                    1.7976931348623157e308,
                ]
            ),
            "boolean": lambda: rng.random() < 0.5,
            "timestamp": lambda: (
                rng.randrange(-MAX_MS, MAX_MS) if rng.random() < 0.3 else rng.randrange(-4 * 10**12, 4 * 10**12)
            ),
        }[kind]()
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.3:  # a raw JSON token Python's json.dumps would not write
        name = rng.choice(list(SCHEMA) + ["extra"])
        text = text[:-1] + (", " if len(text) > 2 else "") + f'"{name}": {rng.choice(ODD_FIELD_VALUES)}}}'
    value = text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that are not UTF-8
    return mutate(rng, value) if rng.random() < 0.3 else value


MAX_MS = 253_402_300_800_005  # a little beyond the last storable millisecond, 9999-12-31T23:59:59.999Z


def mutate(rng: random.Random, value: bytes) -> bytes:
    i = rng.randrange(len(value) + 1)
    return rng.choice(
        [
            lambda: value[:i],
            lambda: value[:i] + bytes([rng.randrange(256)]) + value[i:],
            lambda: value[:i] + value[i + 1 :],
            lambda: b"\xef\xbb\xbf" + value,
            lambda: value + b" " + value,
            lambda: value.replace(b", ", b",\n", 1),
            lambda: b" \t" + value + b"\r",
            lambda: b'{"deep": ' + b"[" * 1200 + b"]" * 1200 + b', "id": "x"}',
            lambda: b"[" + value + b"]",
            lambda: b"",
            lambda: b"   ",
        ]
    )()


@pytest.mark.parametrize("mode", ["append", "upsert_latest"])
def test_whatever_it_takes_it_decodes_exactly_as_the_reference(mode):
    rng = random.Random(20261124)
    p = pipeline(sink_mode=mode, max_value_bytes=3000)
    taken = declined = 0
    for _ in range(3000):
        size = rng.choice([1, 1, 2, 5])
        keys = [rng.choice([b"k1", b"", None, b"\xff", "\u00e9".encode()]) for _ in range(size)]
        records = list(zip(keys, (random_value(rng) for _ in range(size))))
        if decoded_or_none(p, records) is None:
            declined += 1
        else:
            taken += 1
    assert taken > 200 and declined > 200  # both sides of the decision were exercised


def test_an_ordinary_batch_is_taken_and_odd_records_hand_it_to_the_reference():
    p = pipeline()
    good = [
        (
            b"k",
            json.dumps(
                {
                    "id": f"e{i}",
                    "n": i,
                    "amount": i / 7,
                    "ok": i % 2 == 0,
                    "at": 1700000000000 + i,
                    "note": None if i % 3 else "x\ty",
                }
            ).encode(),
        )
        for i in range(200)
    ]
    assert len(decoded_or_none(p, good)) == 200
    for odd in (
        b'{"id": "a", "n": 1.0}',
        b'{"id": "a", "at": "2024-01-01T00:00:00"}',
        b'{"n": 1}',
        None,
        b'{"id": "a\\u0000"}',
        b'{"id": "a", "amount": NaN}',
        b'\xef\xbb\xbf{"id": "a"}',
        b"{} {}",
    ):
        assert decoded_or_none(p, good + [(b"k", odd)]) is None, odd


def test_a_transform_or_a_key_upsert_cannot_use_keeps_the_batch_with_the_reference():
    value = b'{"id": "a"}'
    assert (
        decoded_or_none(pipeline(transform="microingest.transforms:require_positive_amount"), [(b"k", value)]) is None
    )
    assert decoded_or_none(pipeline(sink_mode="upsert_latest"), [(None, value)]) is None
    assert decoded_or_none(pipeline(), [(b"\xff", value)]) is None  # escaped by the reference (storable.key_text)
    assert decoded_or_none(pipeline(), [(b"\\x41", value)]) is None  # text that looks escaped: escaped too
    assert decoded_or_none(pipeline(max_value_bytes=5), [(b"k", value)]) is None


NUMBER_SPELLINGS = [
    "0",
    "-0",
    "0.0",
    "-0.0",
    "-0.0e0",
    "0e5",
    "-0e-5",
    "1E2",
    "1e2",
    "1E+2",
    "1.0e-0",
    "1.5E+3",
    "100",
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    "2.4e-324",
    "2.5e-324",
    "4.9e-324",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "9007199254740993",
    "9007199254740993.0",
    "12345678901234567.89",
    "123456789012345678901234567890",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "0.1",
    "0.30000000000000004",
    "253402300799999",
    "-62135596800000",
    "253402300800000",
    "4000000000001",
    "1e99999",
    "1" * 400,
    "0." + "0" * 300 + "1",
]
STRING_SPELLINGS = (
    [f'"\\u{c:04x}"' for c in range(0x20)]
    + [f'"\\u{c:04X}x"' for c in range(0x20)]
    + [
        '"\\b\\f\\n\\r\\t\\"\\\\\\/"',
        '"\\ud83d\\ude00"',
        '"\\uD83D\\uDE00"',
        '"\U0001f600"',
        '"\\ud800"',
        '"\\udc00"',
        '"\\ude00\\ud83d"',
        '"\\ud83d"',
        '"\\u007f"',
        '"\x7f"',
        '"\\u00e9"',
        '"\u00e9"',
        '"\\uffff"',
        '"\\ufeff"',
        '"\U0010ffff"',
        '"\\udbff\\udfff"',
        '"\\u2028\\u2029"',
        '"\u2028"',
    ]
)


@pytest.mark.parametrize("field", ["n", "amount", "at"])
def test_every_spelling_of_a_number_decodes_as_the_reference_does(field):
    """Each spelling alone in a batch of ordinary records: taken, it must match the reference bit for bit (the sign
    of zero too); and the ordinary spellings must be taken."""
    p = pipeline()
    taken = []
    for token in NUMBER_SPELLINGS:
        value = f'{{"id": "a", "{field}": {token}}}'.encode()
        if decoded_or_none(p, [(b"k", b'{"id": "b"}'), (b"k", value)]) is not None:
            taken.append(token)
    assert {"0", "-0", "100"} <= set(taken)


def test_every_escape_of_a_control_or_astral_character_decodes_as_the_reference_does():
    p = pipeline()
    taken = [
        s for s in STRING_SPELLINGS if decoded_or_none(p, [(b"k", f'{{"id": "a", "note": {s}}}'.encode())]) is not None
    ]
    assert '"\\ud83d\\ude00"' in taken and '"\\u0001"' in taken


def test_negative_zero_is_negative_zero_on_both_paths():
    p = pipeline()
    [row] = decoded_or_none(p, [(b"k", b'{"id": "a", "amount": -0}')])
    assert str(row[4]) == "-0.0"
