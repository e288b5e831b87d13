"""Connections to the platform's Postgres (ledger, history, staging and targets share one database)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import psycopg2

from microingest.errors import Transient


class PostgresUnavailableError(Transient):
    pass


def connect(params: dict[str, Any]):
    try:
        return psycopg2.connect(**params)
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
