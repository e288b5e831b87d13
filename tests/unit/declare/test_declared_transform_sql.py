"""A declaration's `transform_sql`: one record-by-record SELECT over `batch` that keeps the source position and
outputs the declared fields, refused at load otherwise, in words naming what to change."""

import pytest
from test_validate import VALID

from microingest.declare.pipeline import DeclarationError
from microingest.declare.validate import parse_pipeline

POSITION = "source_topic, source_partition, source_offset"


def declared(statement: str):
    return parse_pipeline({**VALID, "transform_sql": statement})


@pytest.mark.parametrize(
    "statement",
    [
        f"SELECT {POSITION}, order_id, total * 1.1 AS total FROM batch WHERE order_id <> 'test'",
        "SELECT * FROM batch WHERE total > 0",
        f"select {POSITION}, upper(order_id) as ORDER_ID, cast(total AS decimal(10, 2)) AS total from BATCH",
        f"SELECT {POSITION}, record_key, kafka_timestamp, order_id, NULL AS total FROM batch b WHERE b.total IS NULL",
        f"SELECT {POSITION}, CASE WHEN total < 0 THEN NULL ELSE order_id END AS order_id, total FROM batch",
    ],
)
def test_a_record_by_record_select_is_taken_as_written(statement):
    assert declared(statement).transform_sql == statement


@pytest.mark.parametrize(
    "statement, problem",
    [
        ("SELEC order_id FROM batch", "is not valid Spark SQL"),
        ("SELECT * FROM batch; SELECT * FROM batch", "must be one statement, not 2"),
        ("SELECT * FROM batch WHERE (", "is not valid Spark SQL"),
        ("SELECT * FROM orders", "must read FROM batch alone (the decoded batch), not orders"),
        ("SELECT * FROM db.batch", "must read FROM batch alone"),
        ("SELECT a.* FROM batch a JOIN batch b ON a.source_offset = b.source_offset", "may not use a join"),
        ("SELECT * FROM batch WHERE total > (SELECT avg(total) FROM batch)", "may not use a subquery"),
        (
            f"SELECT {POSITION}, max(order_id) AS order_id, sum(total) AS total FROM batch GROUP BY {POSITION}",
            "may not use GROUP BY",
        ),
        (
            f"SELECT {POSITION}, order_id, sum(total) OVER (PARTITION BY order_id) AS total FROM batch",
            "may not use a window function",
        ),
        (f"SELECT {POSITION}, order_id, explode(array(total, total)) AS total FROM batch", "may not use a generator"),
        ("SELECT * FROM batch LIMIT 10", "may not use LIMIT"),
        ("SELECT DISTINCT * FROM batch", "may not use DISTINCT"),
        ("SELECT * FROM batch UNION ALL SELECT * FROM batch", "must be a SELECT, not UNION"),
        ("WITH b AS (SELECT * FROM batch) SELECT * FROM b", "may not use a WITH clause"),
        (f"SELECT {POSITION}, order_id, total + 1 FROM batch", "gives a column no name (total + 1): name it with AS"),
        (f"SELECT {POSITION}, order_id, total, total AS extra FROM batch", "outputs extra, which is no declared field"),
        ("SELECT source_topic, source_partition, order_id, total FROM batch", "add source_offset (or use *)"),
        (f"SELECT {POSITION}, order_id FROM batch", "leaves out declared field(s) total"),
        (f"SELECT {POSITION}, order_id, total, total AS TOTAL FROM batch", "outputs TOTAL twice"),
        ("SELECT *, total * 2 AS total FROM batch", "outputs total twice (once through *)"),
        (
            "SELECT source_topic, source_partition, source_offset + 1 AS source_offset, order_id, total FROM batch",
            "must keep source_offset as the record's own",
        ),
        (
            f"SELECT {POSITION}, upper(record_key) AS record_key, order_id, total FROM batch",
            "must keep record_key as the record's own",
        ),
    ],
)
def test_a_statement_that_is_not_one_row_per_record_is_refused_at_load(statement, problem):
    with pytest.raises(DeclarationError) as caught:
        declared(statement)
    assert caught.value.field == "transform_sql"
    assert problem in caught.value.problem


def test_no_statement_is_no_transform():
    assert parse_pipeline(dict(VALID)).transform_sql is None


def test_an_aggregate_without_group_by_is_refused():
    with pytest.raises(DeclarationError, match="may not use an aggregate function"):
        declared(f"SELECT {POSITION}, order_id, max(total) AS total FROM batch")


def test_a_statement_that_is_not_a_select_is_refused():
    with pytest.raises(DeclarationError, match="must be a SELECT, not INSERT"):
        declared("INSERT INTO batch SELECT * FROM batch")
