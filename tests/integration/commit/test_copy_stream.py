"""COPY while producing: everything written lands; a failing producer or a failing COPY fails the whole COPY (and
its transaction) with the real error, and neither side waits for the other forever."""

from __future__ import annotations

import psycopg2
import pytest
from psycopg2 import sql

from microingest.commit import copy_stream
from microingest.commit.copy_stream import copy_while_producing
from microingest.systems.postgres import connection

TABLE = sql.Identifier("copy_stream_test")


@pytest.fixture
def cur(pg, monkeypatch):
    monkeypatch.setattr(copy_stream, "CHUNK_CHARS", 64)  # many chunks, and a full queue, from a few hundred rows
    with connection(pg) as conn, conn.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE copy_stream_test (n bigint PRIMARY KEY, label text)")
        yield cursor
        conn.rollback()


def rows(writer, count: int, bad_at: int | None = None, fail_at: int | None = None) -> int:
    for n in range(count):
        if n == fail_at:
            raise ValueError(f"producer failed at row {n}")
        writer.write(f"{'not a number' if n == bad_at else n}\trow {n}\n")
    return count


def test_every_row_written_while_copying_lands_once(cur):
    assert copy_while_producing(cur, TABLE, ("n", "label"), lambda w: rows(w, 5000)) == 5000
    cur.execute("SELECT count(*), count(DISTINCT n), min(n), max(n) FROM copy_stream_test")
    assert cur.fetchone() == (5000, 5000, 0, 4999)


def test_a_producer_that_fails_fails_the_copy_with_its_own_error(cur):
    with pytest.raises(ValueError, match="producer failed at row 3000"):
        copy_while_producing(cur, TABLE, ("n", "label"), lambda w: rows(w, 5000, fail_at=3000))
    assert cur.connection.get_transaction_status() == psycopg2.extensions.TRANSACTION_STATUS_INERROR


def test_a_copy_that_fails_stops_the_producer_with_the_copy_error(cur):
    with pytest.raises(psycopg2.errors.InvalidTextRepresentation, match="not a number"):
        copy_while_producing(cur, TABLE, ("n", "label"), lambda w: rows(w, 100_000, bad_at=10))
