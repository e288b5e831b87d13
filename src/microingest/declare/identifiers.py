"""Validation of names that end up in SQL or Kafka requests (tables, columns, topics, pipeline ids).

Names are checked against a strict pattern *and* quoted when used (psycopg2.sql.Identifier); either alone would do,
both together mean an injection attempt is rejected with a clear error before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from psycopg2 import sql

from microingest.errors import Refused

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


class IdentifierError(Refused, ValueError):
    pass


def check_identifier(name: str) -> str:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise IdentifierError(
            f"{name!r} is not a valid name (lower-case letters, digits and '_', starting with a letter or '_', "
            "at most 63 characters)"
        )
    return name


def check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not _TOPIC.match(topic) or topic in (".", ".."):
        raise IdentifierError(f"{topic!r} is not a valid Kafka topic name (letters, digits, '.', '_', '-', 1-249)")
    return topic


def split_table_name(name: str) -> tuple[str, str]:
    """'schema.table' or 'table' (schema public) -> (schema, table), both validated."""
    if not isinstance(name, str):
        raise IdentifierError(f"{name!r} is not a table name")
    parts = name.split(".")
    if len(parts) == 1:
        parts = ["public", parts[0]]
    if len(parts) != 2:
        raise IdentifierError(f"{name!r} is not a table name ('table' or 'schema.table')")
    return check_identifier(parts[0]), check_identifier(parts[1])


def table_identifier(name: str) -> sql.Identifier:
    """The quoted, schema-qualified SQL name of a declared 'schema.table' or 'table': validated first, so a bad name
    fails with a clear error instead of reaching SQL, and qualified, so it never depends on the search_path."""
    return sql.Identifier(*split_table_name(name))


def identifier_list(names: Iterable[str]) -> sql.Composed:
    """Quoted column names joined by ', ', for column lists in INSERT, SELECT and COPY."""
    return sql.SQL(", ").join(map(sql.Identifier, names))
