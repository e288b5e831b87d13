"""Differential: the JVM's held function (HeldValueUdf, what a statement's decimal and json values go through when
the JVM decodes) against the reference's (`held_values.held`, the Python function the statement calls otherwise), on
generated values of every Spark type a statement may give such a field, through a Spark Connect session of the
platform's server: wherever the JVM lands a value, the reference lands the same text; a NULL is a NULL in both;
and what the reference lands, the JVM lands too, so the statement's values are held without Python."""

from __future__ import annotations

import json
import random
from datetime import date, datetime, timezone
from decimal import ROUND_DOWN, Context, Decimal, InvalidOperation

import pytest

from helpers.json_corpus import DECIMAL_EDGES, NUMBER_SPELLINGS, decimal_token, json_any, mutate
from microingest.declare.validate import parse_pipeline
from microingest.decode.held_values import LANDS
from microingest.spark import connect
from microingest.spark.jvm_decode import prepare
from microingest.spark.sql_transform import held_call, register_held
from microingest.systems.connections import get_connection

ROWS = 400
FIELDS = {
    "strict": {"type": "decimal", "precision": 12, "scale": 2},
    "rounded": {"type": "decimal", "precision": 12, "scale": 2, "rounding": "half_even"},
    "wide": {"type": "decimal", "precision": 38, "scale": 10, "rounding": "half_even"},
    "digit": {"type": "decimal", "precision": 1, "scale": 0},
    "amounts": {"type": "array", "items": "decimal", "precision": 10, "scale": 2},
    "rounded_amounts": {"type": "array", "items": "decimal", "precision": 10, "scale": 2, "rounding": "half_even"},
    "doc": "json",
}
# Each column a statement might give those fields, of a Spark type.
COLUMNS = (
    "d38 DECIMAL(38,10), d12 DECIMAL(12,2), d38i DECIMAL(38,0), dbl DOUBLE, flt FLOAT, big BIGINT, i INT, s STRING, "
    "b BOOLEAN, dt DATE, ts TIMESTAMP, bin BINARY, a_dec ARRAY<DECIMAL(20,4)>, a_dbl ARRAY<DOUBLE>, "
    "a_str ARRAY<STRING>, a_big ARRAY<BIGINT>"
)
FLOAT_EDGES = [0.5, 0.1, -0.0, 0.0, 1e300, 5e-324, 1e-7, 123.456, 0.125, 0.135, float("nan"), float("inf"), -1e16]


def _number(token: str) -> Decimal | None:
    """A token of the corpus as a number, when it is JSON's number text Python's Decimal reads."""
    try:
        value = Decimal(token)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def _fitting(value: Decimal | None, digits: int, scale: int) -> Decimal | None:
    if value is None or (not value.is_zero() and value.adjusted() >= digits - scale):
        return None
    return value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_DOWN, context=Context(prec=digits + 1))


def _text(rng: random.Random) -> str:
    """Decimal text, a number's spelling, or JSON text, now and then mutated."""
    roll = rng.random()
    if roll < 0.4:
        token = decimal_token(rng)
        return json.loads(token) if token.startswith('"') else token
    if roll < 0.5:
        return rng.choice(NUMBER_SPELLINGS + DECIMAL_EDGES)
    text = json_any(rng)
    return mutate(rng, text.encode()).decode("utf-8", "replace") if rng.random() < 0.2 else text


def _row(rng: random.Random) -> tuple:
    numbers = [_number(decimal_token(rng)) for _ in range(4)]
    floats = [rng.choice(FLOAT_EDGES) if rng.random() < 0.2 else float(n or 0) for n in numbers[:2]]
    nothing = rng.random() < 0.05
    return tuple(
        None if nothing and rng.random() < 0.5 else v
        for v in (
            _fitting(numbers[0], 38, 10),
            _fitting(numbers[1], 12, 2),
            _fitting(numbers[2], 38, 0),
            floats[0],
            floats[1],
            rng.choice([0, 1, -7, 10**11, 2**63 - 1, -(2**63), rng.getrandbits(40)]),
            rng.choice([0, 5, -12, 2**31 - 1]),
            _text(rng),
            rng.random() < 0.5,
            date(2026, 12, 1),
            datetime(2026, 12, 1, tzinfo=timezone.utc),
            b"\x01",
            [None if rng.random() < 0.2 else _fitting(_number(decimal_token(rng)), 20, 4) for _ in range(3)],
            [rng.choice(FLOAT_EDGES) for _ in range(rng.randrange(3))],
            [_text(rng) for _ in range(rng.randrange(3))],
            [rng.getrandbits(20) for _ in range(rng.randrange(3))],
        )
    )


@pytest.fixture(scope="module")
def spark():
    with connect.client_marks_kept():
        session = connect.job_session(get_connection(connect.PLATFORM_CONN_ID), "held-differential")
        try:
            yield session
        finally:
            session.stop()


def test_the_jvm_holds_every_value_as_the_reference_does_or_leaves_it(spark):
    pipeline = parse_pipeline({"name": "held", "topic": "held", "target_table": "held", "schema": FIELDS})
    jvm = prepare(spark, pipeline)
    assert jvm is not None, "the decoder jar is not in the session"
    register_held(spark, pipeline)
    rng = random.Random(59)
    frame = spark.createDataFrame([_row(rng) for _ in range(ROWS)], COLUMNS)
    columns = [c.split()[0] for c in COLUMNS.split(", ")]
    pairs = [(field, column) for field in pipeline.schema for column in columns]
    selected = [
        expr
        for n, (field, column) in enumerate(pairs)
        for expr in (
            f"{held_call(field, column, None)} AS r{n}",
            f"{held_call(field, column, jvm)} AS j{n}",
        )
    ]
    answers = frame.selectExpr(*columns, *selected).collect()

    landed = {column: 0 for column in columns}
    for row in answers:
        for n, (field, column) in enumerate(pairs):
            reference, in_jvm = row[f"r{n}"], row[f"j{n}"]
            if reference is None or reference.startswith(LANDS):
                # What the reference lands (a NULL too), the JVM lands the same: nothing is left to Python.
                assert in_jvm == reference, (field.name, column, row[column], reference, in_jvm)
                landed[column] += reference is not None
            else:
                assert in_jvm is not None and not in_jvm.startswith(LANDS), (field.name, column, row[column], in_jvm)
    assert all(landed[c] for c in columns if c not in ("b", "dt", "ts", "bin")), landed
