"""The whole-batch decoder against the reference (RecordProcessor, record by record): whenever it takes a batch, each
record's staged values are exactly the reference's; and it does take ordinary batches."""

import json
import random

import pyarrow as pa
import pytest

from helpers.hostile_records import SCHEMA
from helpers.json_corpus import NUMBER_SPELLINGS, STRING_SPELLINGS, random_value
from helpers.reference_check import rows_as_reference
from microingest.declare.validate import parse_pipeline
from microingest.decode.arrow_json import decode_values
from microingest.decode.records import RecordProcessor


def pipeline(**changes):
    return parse_pipeline({"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, **changes})


def decoded_or_none(p, records):
    """decode_values on these (key, value) records: their rows, checked against the reference, or None."""
    got = decode_values(
        pa.array([k for k, _ in records], pa.binary()), pa.array([v for _, v in records], pa.binary()), p
    )
    return rows_as_reference(got, records, RecordProcessor(p))


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
