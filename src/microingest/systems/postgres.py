"""Connections to the platform's Postgres (ledger, history, staging and targets share one database)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2

from microingest.errors import Refused, Transient


class PostgresUnavailableError(Transient):
    pass


class DatabaseEncodingError(Refused):
    """The database cannot hold every text a record may carry: only a UTF8 database can."""


def connect(params: dict[str, Any]):
    """A connection that speaks UTF-8 whatever PGCLIENTENCODING, the role's or the database's settings say: the
    platform sends UTF-8 (COPY data above all), which any other client encoding would silently re-read."""
    try:
        return psycopg2.connect(**{**params, "client_encoding": "UTF8"})
    except psycopg2.OperationalError as exc:
        where = f"{params.get('host')}:{params.get('port')}/{params.get('dbname')}"
        # psycopg2's message can include the DSN; keep only its first line, which never holds the password.
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PostgresUnavailableError(f"Postgres at {where} is unreachable: {reason}") from None


@contextmanager
def connection(params: dict[str, Any]) -> Iterator[Any]:
    conn = connect(params)
    try:
        yield conn
    finally:
        conn.close()


# Advisory locks take a bigint; keys are readable strings ("microingest:pipeline:<name>", a batch id) hashed to one
# here, so every caller hashes alike and two callers naming the same key contend for the same lock.
_LOCK_ID = "hashtextextended(%s, 0)"


def advisory_lock(cur, key: str, *, transaction: bool = False) -> None:
    """Wait for the lock on `key`. A transaction lock ends with the transaction (COMMIT or ROLLBACK); a session lock
    outlives it, until `advisory_unlock` or the end of the connection, so a dead client never holds one for long."""
    function = "pg_advisory_xact_lock" if transaction else "pg_advisory_lock"
    cur.execute(f"SELECT {function}({_LOCK_ID})", (key,))


def try_advisory_lock(cur, key: str) -> bool:
    """Take the session lock on `key` if it is free; False, at once, when another session holds it."""
    cur.execute(f"SELECT pg_try_advisory_lock({_LOCK_ID})", (key,))
    return cur.fetchone()[0]


def advisory_unlock(cur, key: str) -> None:
    cur.execute(f"SELECT pg_advisory_unlock({_LOCK_ID})", (key,))


def require_utf8(cur) -> None:
    """Refuse a database whose encoding is not UTF8. SQL_ASCII stores bytes unchecked, but its jsonb refuses `\\u`
    escapes above 007F: a dead letter with one non-ASCII header would fail its batch on every retry, and its skip."""
    cur.execute(
        "SELECT current_database(), pg_encoding_to_char(encoding) FROM pg_database WHERE datname = current_database()"
    )
    database, encoding = cur.fetchone()
    if encoding != "UTF8":
        raise DatabaseEncodingError(
            f"database {database} uses encoding {encoding}; microingest stores text, keys and headers as UTF-8, "
            "which only a UTF8 database holds whole: use one made with CREATE DATABASE ... ENCODING 'UTF8' "
            "TEMPLATE template0"
        )
