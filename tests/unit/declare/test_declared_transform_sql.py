"""A declaration's `transform_sql`: one record-by-record SELECT over `batch` that keeps the source position and
outputs the declared fields, refused at load otherwise, in words naming what to change."""

import pytest
from test_validate import VALID

from microingest.declare.pipeline import DeclarationError
from microingest.declare.validate import parse_pipeline
from microingest.spark.typed_rows import typed_schema

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


def test_checks_become_conditions_of_their_kind():
    pipeline = parse_pipeline(
        {
            **VALID,
            "checks": [
                {"sql": "count(*) FILTER (WHERE total < 0) = 0", "on_fail": "refuse"},
                {"field": "order_id", "not_null": True, "on_fail": "dead_letter"},
                {"field": "total", "not_null": True, "on_fail": "refuse"},
                {"sql": "total < 1000 AND source_partition >= 0", "on_fail": "dead_letter"},
            ],
        }
    )
    assert [(c.condition, c.per_record) for c in pipeline.checks] == [
        ("count(*) FILTER (WHERE total < 0) = 0", False),
        ("`order_id` IS NOT NULL", True),
        ("count_if(`total` IS NULL) = 0", False),
        ("total < 1000 AND source_partition >= 0", True),
    ]
    assert pipeline.rows_in_spark and not parse_pipeline(dict(VALID)).rows_in_spark


@pytest.mark.parametrize(
    "check, field, problem",
    [
        ({"sql": "total > 0", "on_fail": "refuse"}, "checks.0.sql", "total is outside any aggregate"),
        ({"sql": "sum(total) > 0", "on_fail": "dead_letter"}, "checks.0.sql", "it may not aggregate"),
        ({"sql": "nope > 0", "on_fail": "dead_letter"}, "checks.0.sql", "names nope, which is no field"),
        ({"sql": "record_key IS NOT NULL", "on_fail": "dead_letter"}, "checks.0.sql", "names record_key"),
        ({"sql": "total > 0 FROM x", "on_fail": "dead_letter"}, "checks.0.sql", "must be one condition"),
        ({"sql": "(SELECT 1) = 1", "on_fail": "dead_letter"}, "checks.0.sql", "may not use a subquery"),
        ({"sql": "total >", "on_fail": "dead_letter"}, "checks.0.sql", "is not a valid Spark SQL condition"),
        ({"field": "nope", "not_null": True, "on_fail": "refuse"}, "checks.0.field", "names nope"),
        ({"field": "total", "on_fail": "refuse"}, "checks.0", "a check of a field says not_null: true"),
        ({"sql": "total > 0", "field": "total", "on_fail": "refuse"}, "checks.0", "one of them"),
        ({"sql": "total > 0"}, "checks.0.on_fail", "is required"),
        ({"sql": "total > 0", "on_fail": "drop"}, "checks.0.on_fail", "must be one of refuse, dead_letter"),
    ],
)
def test_a_malformed_check_names_its_field(check, field, problem):
    with pytest.raises(DeclarationError) as caught:
        parse_pipeline({**VALID, "checks": [check]})
    assert (caught.value.field, problem in caught.value.problem) == (field, True), caught.value.problem


@pytest.mark.parametrize(
    "declared, field, problem",
    [
        ({"mask": {"total": "sha256"}}, "mask.total", "masks text fields only; total is a double field"),
        ({"mask": {"nope": "redact"}}, "mask.nope", "nope is no field of the schema"),
        ({"mask": {"order_id": "md5"}}, "mask.order_id", "must be one of sha256, hmac_sha256, redact, truncate_24"),
        ({"mask": {"order_id": "hmac_sha256"}}, "mask_conn_id", "is required by hmac_sha256"),
        ({"mask": {"order_id": "sha256"}, "mask_conn_id": "key"}, "mask_conn_id", "only applies to a mask of hmac"),
        ({"mask": ["order_id"]}, "mask", "must be a mapping of field name to a mask"),
    ],
)
def test_a_malformed_mask_names_its_field(declared, field, problem):
    with pytest.raises(DeclarationError) as caught:
        parse_pipeline({**VALID, **declared})
    assert (caught.value.field, problem in caught.value.problem) == (field, True), caught.value.problem


def test_masks_keep_their_order_and_a_keyed_hash_its_connection():
    pipeline = parse_pipeline({**VALID, "mask": {"order_id": "hmac_sha256"}, "mask_conn_id": "pii_key"})
    assert (pipeline.mask, pipeline.mask_conn_id, pipeline.rows_in_spark) == (
        (("order_id", "hmac_sha256"),),
        "pii_key",
        True,
    )


@pytest.mark.parametrize(
    "statement, problem",
    [
        ("SELECT *, rand() AS total FROM batch".replace("*, ", f"{POSITION}, order_id, "), "may not call rand"),
        ("SELECT * FROM batch WHERE rand() < 0.5", "may not call rand: it is a function whose value changes"),
        ("SELECT * FROM batch WHERE spark_partition_id() = 0", "may not call spark_partition_id"),
        (f"SELECT {POSITION}, uuid() AS order_id, total FROM batch", "may not call uuid"),
        (f"SELECT {POSITION}, order_id, stack(1, total) AS total FROM batch", "may not call stack: it is a generator"),
        ("SELECT * FROM batch UNPIVOT (v FOR k IN (order_id, total))", "may not use PIVOT or UNPIVOT"),
        (
            f"SELECT {POSITION}, reflect('java.lang.System', 'getenv', 'HOME') AS order_id, total FROM batch",
            "may not call reflect: it is a call into the JVM",
        ),
    ],
)
def test_functions_that_change_rows_or_reach_the_jvm_are_refused(statement, problem):
    with pytest.raises(DeclarationError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        declared(statement)


@pytest.mark.parametrize("name", ["_read", "_summary", "_summary_notes", "_summary_anything"])
def test_the_platforms_own_columns_are_no_field_names_where_rows_pass_through_spark_sql(name):
    schema = {**VALID["schema"], name: "string"}
    with pytest.raises(DeclarationError, match=f"'{name}' is reserved where rows pass through Spark SQL"):
        parse_pipeline({**VALID, "schema": schema, "transform_sql": "SELECT * FROM batch"})


def test_fields_named_as_the_summary_says_what_it_holds_are_columns_of_their_own_in_spark():
    schema = {**VALID["schema"], **{name: "string" for name in ("dead", "good", "notes", "taken", "mismatch")}}
    pipeline = parse_pipeline({**VALID, "schema": schema, "transform_sql": "SELECT * FROM batch"})
    names = typed_schema(pipeline).names
    assert len(names) == len(set(names))


def test_a_check_names_its_columns_alone():
    with pytest.raises(DeclarationError, match=r"names batch\.total: name columns alone"):
        parse_pipeline({**VALID, "checks": [{"sql": "batch.total > 0", "on_fail": "dead_letter"}]})


def test_an_upsert_cannot_mask_its_key():
    schema = {**VALID["schema"], "customer": {"type": "string", "from": "key"}}
    declared = {**VALID, "schema": schema, "sink_mode": "upsert_latest", "mask": {"customer": "sha256"}}
    with pytest.raises(DeclarationError, match="customer is the record key, which upsert_latest keeps as it is"):
        parse_pipeline(declared)
    assert parse_pipeline({**declared, "sink_mode": "append"}).mask == (("customer", "sha256"),)
