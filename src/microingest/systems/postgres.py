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
