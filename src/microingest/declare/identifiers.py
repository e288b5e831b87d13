"""Validation of names that end up in SQL or Kafka requests (tables, columns, topics, pipeline ids).

Names are checked against a strict pattern *and* quoted when used (psycopg2.sql.Identifier); either alone would do,
both together mean an injection attempt is rejected with a clear error before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from psycopg2 import sql

from microingest.batches import ROW_LAYOUT
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


def is_topic_name(name: str) -> bool:
    """A name Kafka could give a topic (a restarted topic's old records are kept under one it could not)."""
    return bool(_TOPIC.match(name)) and name not in (".", "..")


def check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not _TOPIC.match(topic) or topic in (".", ".."):
        raise IdentifierError(f"{topic!r} is not a valid Kafka topic name (letters, digits, '.', '_', '-', 1-249)")
    return topic


# Postgres objects the platform derives from a pipeline's name; the longest suffix bounds the name's length.
PLATFORM_SCHEMAS = ("microingest", "microingest_staging")
# dead_letters: the platform's table of that name (and, until migration 012, its staged twin); lag_sla: a DAG's id
RESERVED_PIPELINE_NAMES = ("dead_letters", "lag_sla")
_DERIVED_NAME_SUFFIX = "_position"  # the longest suffix a name-derived object takes (a position index)
MAX_PIPELINE_NAME = 63 - len(_DERIVED_NAME_SUFFIX)


def check_pipeline_name(name: str) -> str:
    check_identifier(name)
    if len(name) > MAX_PIPELINE_NAME:
        raise IdentifierError(
            f"{name!r} is {len(name)} characters; pipeline names may have at most "
            f"{MAX_PIPELINE_NAME} so that the Postgres objects named after them (such as "
            f"'<name>{_DERIVED_NAME_SUFFIX}') stay within Postgres' 63-character limit"
        )
    if name in RESERVED_PIPELINE_NAMES:
        raise IdentifierError(f"{name!r} is reserved: the platform's own objects (a table, a DAG) have that name")
    return name


def check_field_name(name: str) -> str:
    """A declared field's name: its column sits beside the decoded row's own (ROW_LAYOUT), which it may not shadow."""
    check_identifier(name)
    holds = {c.name: c.holds for c in ROW_LAYOUT}
    if name in holds:
        raise IdentifierError(
            f"'{name}' is reserved: the platform's staging table uses it for {holds[name]}; leave it out of the schema"
        )
    return name


def check_target_table(name: str) -> str:
    """A declared target: 'schema.table' (public when no schema is given), never in a schema of the platform's or
    Postgres' own."""
    schema, table = split_table_name(name)
    if schema in PLATFORM_SCHEMAS or schema.startswith("pg_") or schema == "information_schema":
        raise IdentifierError(
            f"{schema}.{table} is in schema {schema!r}, which belongs to the platform or to "
            "Postgres itself; put targets in a schema of your own (e.g. public or analytics)"
        )
    return f"{schema}.{table}"


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
