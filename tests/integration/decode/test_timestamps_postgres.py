"""ISO text into a declared timestamp lands as Postgres itself reads that text (`'...'::timestamptz`): the decoder's
rounding of extra fractional digits, leap seconds and 24:00:00 checked against a real server, case by case."""

import random

import psycopg2
import pytest

from microingest.decode.timestamps import from_iso
from microingest.systems.postgres import connection

FIXED = [
    "2024-01-01T00:00:00.1234565Z",
    "2024-01-01T00:00:00.1234575Z",
    "2024-01-01T00:00:00.0000005Z",
    "2024-01-01T00:00:00.0000015Z",
    "2024-01-01T00:00:00.9999995Z",
    "2024-01-01T00:00:00.99999949999Z",
    "2024-12-31T23:59:59.99999999+01:00",
    "2016-12-31T23:59:60Z",
    "2016-12-31T23:59:60.5Z",
    "2016-12-31T23:59:60.9999999Z",
    "2016-12-31T10:15:60.5Z",
    "2024-01-01T23:59:59.9999999Z",
    "2024-01-01T24:00:00.0000001Z",
    "2024-01-01T24:00:00.0000005Z",
    "2024-02-28T24:00:00",
    "2024-02-28T24:00:00.000Z",
    "2024-02-28T10:15:60",
    "2024-01-01T24:00:01",
    "2024-01-01T24:00:00.5",
    "2024-01-01T23:59:61",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.9999994Z",
]


def texts() -> list[str]:
    rng = random.Random(36)
    drawn = [
        f"2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:"
        f"{rng.randrange(61):02d}.{rng.randrange(10**12):0{rng.choice([7, 8, 9, 12])}d}"[:40]
        + "Z"
        for _ in range(400)
    ]
    # Ties are where rounding rules differ: a 5 in the seventh digit, nothing after it.
    ties = [f"2024-03-01T12:00:00.{rng.randrange(10**6):06d}5Z" for _ in range(200)]
    return FIXED + drawn + ties


def postgres_reads(cur, text: str):
    try:
        cur.execute("SELECT %s::timestamptz", (text,))
        return cur.fetchone()[0]
    except psycopg2.DataError:
        cur.connection.rollback()
        return None


def decoder_reads(text: str):
    try:
        return from_iso(text)
    except ValueError:
        return None


def test_iso_text_lands_as_postgres_reads_it(pg):
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute("SET TIME ZONE 'UTC'")
        conn.commit()
        differ = [(t, postgres_reads(cur, t), decoder_reads(t)) for t in texts()]
        differ = [d for d in differ if d[1] != d[2]]
    assert differ == []


@pytest.mark.parametrize("text", ["2016-12-31T23:59:60Z", "2024-02-28T24:00:00"])
def test_postgres_takes_the_times_python_refuses(pg, text):
    with connection(pg) as conn, conn.cursor() as cur:
        assert postgres_reads(cur, text) is not None
