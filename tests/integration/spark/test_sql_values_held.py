"""Differential: the values a transform_sql statement gives decimal, json and timestamp fields land exactly as the
reference decoder lands the same values read from a record, or are dead letters where it makes dead letters. The same
edge values travel as JSON numbers, documents and epoch milliseconds to a pipeline without a statement, and as text
turned into those types by SQL expressions (a cast, decimal arithmetic, timestamp_millis) to one with it."""

import json
from decimal import Decimal

import pytest
from psycopg2 import sql

from helpers.pipeline_env import new_env, own_env

AMOUNTS = ["0.125", "0.135", "-0.005", "11.9610", "12.50", "9999999999.99", "9999999999.995", "99999999999.9", "0"]
BASES = ["10.05", "10.00", "0.01"]  # times 1.19: 11.9595, 11.9000, 0.0119
DOCS = [None, '{"a": 1}', '{"a": "\\ud800"}', '{"n": 1e400000}', "[1, 2.50, -0]", '"text"', "null", '{"a": "x\\u0000"}']
TIMES_MS = [0, -62135596800000, -62135596800001, 253402300799999, 253402300800000]
VALID = ("1.00", "1.00", "{}", 1_700_000_000_000)
STATEMENT = (
    "SELECT source_topic, source_partition, source_offset, event_id, CAST(amount_text AS DECIMAL(30, 10)) AS amount, "
    "CAST(base_text AS DECIMAL(12, 2)) * 1.19 AS charged, doc_text AS doc, timestamp_millis(at_ms) AS at, "
    "from_json(concat('[', amount_text, ', null]'), 'array<decimal(30, 10)>') AS amounts, "
    "amount_text, base_text, doc_text, at_ms FROM batch"
)


def cases() -> list[tuple[str, str, str, int]]:
    """(amount, base, doc, at) per record: one edge value each, the rest valid."""
    amount, base, doc, at = VALID
    return (
        [(a, base, doc, at) for a in AMOUNTS]
        + [(amount, b, doc, at) for b in BASES]
        + [(amount, base, d, at) for d in DOCS]
        + [(amount, base, doc, t) for t in TIMES_MS]
    )


@pytest.mark.parametrize("rounding", [None, "half_even"])
def test_statement_values_land_as_the_decoder_lands_them(pg, kafka, tmp_path, monkeypatch, rounding):
    decimal = {"type": "decimal", "precision": 12, "scale": 2, **({"rounding": rounding} if rounding else {})}
    schema = {"event_id": {"type": "string", "required": True}, "amount": decimal, "charged": decimal}
    schema |= {"doc": "json", "at": "timestamp", "amounts": {**decimal, "type": "array", "items": "decimal"}}
    lenient = {"dead_letter": {"max_fraction": 1}}
    plain = own_env(pg, kafka, tmp_path, monkeypatch, schema=schema, **lenient)
    texts = {"amount_text": "string", "base_text": "string", "doc_text": "string", "at_ms": "integer"}
    through = new_env(
        pg,
        kafka,
        plain.pipelines_dir,
        f"{plain.pipeline.name}_sql",
        f"{plain.topic}-sql",
        schema=schema | texts,
        transform_sql=STATEMENT,
        **lenient,
    )
    for env in (plain, through):
        env.replace_target(
            "source_topic text, source_partition integer, source_offset bigint, kafka_timestamp timestamptz, "
            "batch_id uuid, event_id text NOT NULL, amount numeric(12,2), charged numeric(12,2), doc jsonb, "
            "at timestamptz, amounts numeric(12,2)[], amount_text text, base_text text, doc_text text, at_ms bigint, "
            "ingested_at timestamptz, "
            "PRIMARY KEY (source_topic, source_partition, source_offset)"
        )
    records = cases()
    plain.send_to(
        0,
        [
            (
                b"k",
                (
                    f'{{"event_id": "e{i}", "amount": {a}, "charged": {Decimal(b) * Decimal("1.19")}, '
                    + ("" if d is None else f'"doc": {d}, ')  # None: no such field, SQL's NULL in the other
                    + f'"at": {t}, "amounts": [{a}, null]}}'
                ).encode(),
            )
            for i, (a, b, d, t) in enumerate(records)
        ],
    )
    through.send_to(
        0,
        [
            (
                b"k",
                json.dumps(
                    {"event_id": f"e{i}", "amount_text": a, "base_text": b, "at_ms": t}
                    | ({} if d is None else {"doc_text": d})
                ).encode(),
            )
            for i, (a, b, d, t) in enumerate(records)
        ],
    )

    plain.ingest_all()
    through.ingest_all()

    landed = sql.SQL("SELECT source_offset, event_id, amount, charged, doc::text, at, amounts FROM {} ORDER BY 1")
    rows = plain.query(landed.format(plain.table))
    assert through.query(landed.format(through.table)) == rows
    decoder = {o: cls for _, o, cls, *_ in plain.dead_letters()}
    statement = {o: (cls, message) for _, o, cls, message, *_ in through.dead_letters()}
    assert sorted(statement) == sorted(decoder), "the same records are dead letters"
    assert {cls for cls, _ in statement.values()} == {"sql_failed"}
    assert len(rows) + len(decoder) == len(records) and rows and decoder
    refused = {o: m for o, (_, m) in statement.items()}
    assert "transform_sql gave amount a value the decoder refuses" in refused[AMOUNTS.index("99999999999.9")]
