import pytest
from psycopg2 import sql

from microingest.declare.identifiers import IdentifierError, identifier_list, table_identifier


@pytest.mark.parametrize("name, parts", [("events", ("public", "events")), ("app.events", ("app", "events"))])
def test_table_names_are_always_schema_qualified(name, parts):
    assert table_identifier(name) == sql.Identifier(*parts)


@pytest.mark.parametrize("name", ['events"; DROP TABLE x; --', "a.b.c", "Events", ""])
def test_bad_table_names_fail_before_any_sql(name):
    with pytest.raises(IdentifierError):
        table_identifier(name)


def test_identifier_list_quotes_each_name_and_joins_them_with_commas():
    assert identifier_list(["offset", "user id"]) == sql.Composed(
        [sql.Identifier("offset"), sql.SQL(", "), sql.Identifier("user id")]
    )


def test_identifier_list_takes_a_generator():
    assert identifier_list(n for n in ("a",)) == sql.Composed([sql.Identifier("a")])
