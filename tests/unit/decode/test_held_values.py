"""A statement's decimal and json values held to the decoder's rules (pure): the issue's cases, each as the decoder
itself would land or refuse the value."""

from decimal import Decimal

import pytest

from microingest.declare.pipeline import Field
from microingest.decode.converters import convert
from microingest.decode.held_values import LANDS, REFUSED, held

STRICT = Field("amount", "decimal", precision=12, scale=2)
ROUNDED = Field("amount", "decimal", precision=12, scale=2, rounding="half_even")
DOC = Field("doc", "json")


@pytest.mark.parametrize(
    "field, value, expected",
    [
        (STRICT, Decimal("11.9595"), None),  # amount * 1.19 without rounding: refused, never 11.96
        (ROUNDED, Decimal("11.9595"), "11.96"),
        (ROUNDED, Decimal("0.125"), "0.12"),  # half to even, not Spark's half up (0.13)
        (ROUNDED, Decimal("0.135"), "0.14"),
        (STRICT, Decimal("11.9000"), "11.90"),  # trailing zeros are no digits lost
        (STRICT, 0.5, "0.50"),
        (STRICT, 0.1, None),  # a double at its exact binary value, as the decoder takes an Avro double
        (STRICT, "12.5", "12.50"),
        (ROUNDED, Decimal("9999999999.995"), None),  # rounds past the precision
    ],
)
def test_a_decimal_lands_exactly_as_the_decoder_lands_it(field, value, expected):
    answer = held(field, value)
    if expected is None:
        assert answer is not None and answer.startswith(REFUSED)
        with pytest.raises(ValueError):
            convert(field, value)
    else:
        assert answer == LANDS + expected == LANDS + str(convert(field, value))


def test_json_text_is_read_and_held_as_a_records_json_is():
    assert held(DOC, '{"n": 1.50, "z": -0}') == LANDS + '{"n":1.50,"z":-0}'
    assert held(DOC, "null") is None and held(DOC, None) is None
    for text in ('{"a": "\\ud800"}', '{"n": 1e400000}', '{"a": "x\\u0000"}', "{broken", "[0e1000000000000000000]"):
        assert held(DOC, text).startswith(REFUSED), text
