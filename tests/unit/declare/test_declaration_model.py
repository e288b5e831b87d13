"""The declaration's pydantic model (declare.model) behind parse_pipeline: its fields are Pipeline's with Pipeline's
defaults, every *_seconds field is bounded, and each malformed declaration gets the message it got before the model
(the cases test_validate does not already pin)."""

import pytest
from pydantic import BaseModel
from test_validate import VALID, aggregate

from microingest.declare.model import MAX_SECONDS, Declaration
from microingest.declare.pipeline import DeclarationError, Field, Pipeline
from microingest.declare.validate import parse_pipeline

KNOWN = (
    "aggregate, checks, dead_letter, description, kafka_conn_id, key_format, lag, mask, mask_conn_id, "
    "max_active_runs, max_records_per_batch, max_records_per_run, max_run_seconds, max_value_bytes, name, "
    "on_records, on_retention_gap, on_topic_recreated, partition_by, postgres_conn_id, retries, "
    "retry_delay_seconds, schedule, schema, schema_registry_conn_id, sink_mode, spark_conn_id, "
    "start_from, target_table, topic, topic_pattern, topics, transform, transform_sql, value_format"
)
BAD_NAME = (
    "is not a valid name (lower-case letters, digits and '_', starting with a letter or '_', at most 63 characters)"
)

ONE_OF_THE_TYPES = (
    "must be one of string, integer, double, boolean, timestamp, decimal, date, uuid, bytes, json, array, got "
)
FIELD_SHAPE = (
    "must be a type name or a mapping with 'type' (or 'from') and optional required, precision, scale, rounding, "
    "items, path, name"
)


def test_the_model_declares_the_pipelines_fields():
    declared = {field.alias or name for name, field in Declaration.model_fields.items()}
    # `topic` and `topics` both declare Pipeline.topics
    assert declared == set(Pipeline.__dataclass_fields__) - {"source"} | {"topic"}
    assert ", ".join(sorted(declared)) == KNOWN


def test_what_a_declaration_leaves_out_takes_the_pipelines_default():
    expected = Pipeline(
        "orders", ("shop.orders-v1",), "analytics.orders", (Field("order_id", "string", True), Field("total", "double"))
    )
    assert parse_pipeline(dict(VALID)) == expected


def seconds_fields(model: type[BaseModel], where: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    found = set()
    for name, field in model.model_fields.items():
        if name.endswith("_seconds"):
            found.add((*where, name))
        for section in getattr(field.annotation, "__args__", (field.annotation,)):
            if isinstance(section, type) and issubclass(section, BaseModel):
                found |= seconds_fields(section, (*where, field.alias or name))
    return found


SECONDS = {
    ("max_run_seconds",): {},
    ("retry_delay_seconds",): {},
    ("lag", "window_seconds"): {},
    ("lag", "gate", "max_wait_seconds"): {"min_records": 1},
    ("lag", "gate", "wait_seconds"): {"min_records": 1, "max_wait_seconds": 1},
    ("lag", "gate", "poke_seconds"): {"min_records": 1, "max_wait_seconds": 1},
    ("lag", "sla", "max_time_lag_seconds"): {},
    ("lag", "sla", "grace_seconds"): {"max_time_lag_seconds": 1},
    ("on_records", "max_wait_seconds"): {},
    ("on_records", "poke_seconds"): {},
}


def declaring(path: tuple[str, ...], beside: dict, value: int) -> dict:
    section: dict = {**beside, path[-1]: value}
    for name in reversed(path[:-1]):
        section = {name: section}
    woken = {"schedule": "on_records"} if path[0] == "on_records" else {}  # the section needs that schedule
    return {**VALID, **woken, **section}


def test_every_seconds_field_is_at_most_ten_years():
    """Each becomes a timedelta added to now where all pipelines are served together."""
    assert seconds_fields(Declaration) == set(SECONDS)
    for path, beside in SECONDS.items():
        parse_pipeline(declaring(path, beside, MAX_SECONDS))
        with pytest.raises(DeclarationError) as err:
            parse_pipeline(declaring(path, beside, MAX_SECONDS + 1), "orders.yaml")
        assert (err.value.field, err.value.problem) == (
            ".".join(path),
            f"must be at most 315,360,000 (ten years), got {MAX_SECONDS + 1}",
        )


@pytest.mark.parametrize(
    "declaration, field, problem",
    [
        ({**VALID, "value_format": 5}, "value_format", "must be text, got a number (5)"),
        (
            {**VALID, "value_format": "xml"},
            "value_format",
            "must be one of json, avro, protobuf, json_schema, got 'xml'",
        ),
        (
            {**VALID, "key_format": "avro"},
            "key_format",
            "only applies where keys are read: sink_mode upsert_latest or a field from: key, not append without one",
        ),
        ({**VALID, "start_from": None}, "start_from", "must be text, got nothing (null)"),
        ({**VALID, "description": None}, "description", "must be text, got nothing (null)"),
        ({**VALID, "schedule": 5}, "schedule", "must be text, got a number (5)"),
        ({**VALID, "transform": "no_function"}, "transform", "must be 'package.module:function', got 'no_function'"),
        ({**VALID, "transform": 5}, "transform", "must be text, got a number (5)"),
        ({**VALID, "retries": -1}, "retries", "must be an integer >= 0, got -1"),
        ({**VALID, "max_value_bytes": 0}, "max_value_bytes", "must be an integer >= 1, got 0"),
        ({**VALID, "max_active_runs": 1.0}, "max_active_runs", "must be an integer >= 1, got 1.0"),
        (
            {**VALID, "max_records_per_run": 10**30, "max_run_seconds": 315_360_001},
            "max_run_seconds",
            "must be at most 315,360,000 (ten years), got 315360001",
        ),
        (
            {**VALID, "schema": {"x": {"required": True}}},
            "schema.x.type",
            ONE_OF_THE_TYPES + "None",
        ),
        (
            {**VALID, "schema": {"x": {"type": 5}}},
            "schema.x.type",
            ONE_OF_THE_TYPES + "5",
        ),
        (
            {**VALID, "schema": {"x": {"type": "string", "nullable": True}}},
            "schema.x",
            FIELD_SHAPE,
        ),
        ({**VALID, "schema": {"x": 5}}, "schema.x", FIELD_SHAPE),
        ({**VALID, "schema": ["x"]}, "schema", "must be a non-empty mapping of field name to type"),
        (
            {**VALID, "schema": {"x": {"type": "string", "required": 1}}},
            "schema.x.required",
            "must be true or false, got 1",
        ),
        (
            {**VALID, "schema": {"Bad-Name": "string", "source_offset": "string"}},
            "schema.Bad-Name",
            f"'Bad-Name' {BAD_NAME}",
        ),
        ({**VALID, "dead_letter": {"max_records": -1}}, "dead_letter.max_records", "must be an integer >= 0, got -1"),
        (
            {**VALID, "dead_letter": {"max_fraction": 1.5}},
            "dead_letter.max_fraction",
            "must be a number from 0 to 1, got 1.5",
        ),
        (
            {**VALID, "dead_letter": {"max_fraction": True}},
            "dead_letter.max_fraction",
            "must be a number from 0 to 1, got True",
        ),
        (
            {**VALID, "dead_letter": {"max_fraction": float("nan")}},
            "dead_letter.max_fraction",
            "must be a number from 0 to 1, got nan",
        ),
        (
            {**VALID, "dead_letter": {"max_count": 1}},
            "dead_letter",
            "must be a mapping with max_records and/or max_fraction",
        ),
        ({**VALID, "dead_letter": [1]}, "dead_letter", "must be a mapping with max_records and/or max_fraction"),
        ({**VALID, "sink_mode": "aggregate"}, "aggregate", "is required when sink_mode is aggregate"),
        ({**aggregate(), "aggregate": None}, "aggregate", "is required when sink_mode is aggregate"),
        (
            {**VALID, "aggregate": {"group_by": ["order_id"]}},
            "aggregate",
            "only applies to sink_mode aggregate, not append",
        ),
        (
            {**VALID, "sink_mode": "merge", "aggregate": "x"},
            "sink_mode",
            "must be one of append, upsert_latest, aggregate, got 'merge'",
        ),
        (aggregate(every=1), "aggregate", "must be a mapping with group_by, measures and optional time_bucket"),
        (aggregate(time_bucket={"field": "ts"}), "aggregate.time_bucket", "must be a mapping with field and width"),
        (
            aggregate(time_bucket={"field": "n", "width": "1 hour"}),
            "aggregate.time_bucket.field",
            "'n' must be a required timestamp field of the schema",
        ),
        (
            aggregate(time_bucket={"field": "ts", "width": "hourly"}),
            "aggregate.time_bucket.width",
            "must look like '15 minutes' or '1 hour', got 'hourly'",
        ),
        (aggregate(group_by=["n"]), "aggregate.group_by", "'n' must be a required field of the schema"),
        (aggregate(group_by=[]), "aggregate.group_by", "give group_by fields, a time_bucket, or both"),
        (aggregate(group_by=["k", 1]), "aggregate.group_by", "must be a list of schema field names, got a list"),
        (aggregate(measures={}), "aggregate.measures", "must map measure column names to count or {sum: field}"),
        (aggregate(measures={"k": "count"}), "aggregate.measures.k", "clashes with a group column"),
        (
            aggregate(measures={"c": "max"}),
            "aggregate.measures.c",
            "must be count or {sum: <numeric field>}, got 'max'",
        ),
        (aggregate(measures={"c": {}}), "aggregate.measures.c", "must be count or {sum: <numeric field>}, got {}"),
        (
            aggregate(measures={"c": {"sum": "k"}}),
            "aggregate.measures.c.sum",
            "'k' must be an integer or double field of the schema",
        ),
        (
            aggregate(measures={"c": {"sum": None}}),
            "aggregate.measures.c.sum",
            "must name a numeric field of the schema (text), got nothing (null)",
        ),
        (aggregate(measures={"Bad": "count"}), "aggregate.measures.Bad", f"'Bad' {BAD_NAME}"),
        ({**VALID, "lag": "soon"}, "lag", "must be a mapping, got str"),
        ({**VALID, "lag": {"gate": 5}}, "lag.gate", "must be a mapping, got int"),
        (
            {**VALID, "lag": {"gate": {"min_records": 1, "max_wait_seconds": 1, "wait": 2}}},
            "lag.gate.wait",
            "unknown field (known: max_wait_seconds, min_records, poke_seconds, wait_seconds)",
        ),
        (
            {**VALID, "lag": {"sla": {"max_time_lag_seconds": None}}},
            "lag.sla.max_time_lag_seconds",
            "must be a positive integer, got None",
        ),
        (
            None,
            "<root>",
            "the file is empty; declare at least name, target_table, schema and one of topic, topics or topic_pattern",
        ),
        ("a sentence", "<root>", "expected a mapping of fields, got text ('a sentence')"),
    ],
)
def test_each_malformed_declaration_gets_the_message_it_always_got(declaration, field, problem):
    with pytest.raises(DeclarationError) as err:
        parse_pipeline(declaration, "orders.yaml")
    assert (err.value.field, err.value.problem) == (field, problem)


@pytest.mark.parametrize(
    "declaration, field, problem",
    [
        ({**VALID, "topik": "typo", "topic": None}, "topik", f"unknown field (known: {KNOWN})"),
        ({**VALID, "name": "Bad", "zz": 1, "aa": 2}, "aa", f"unknown field (known: {KNOWN})"),
        ({"name": "Bad", "topic": "t"}, "target_table", "is required"),
        (
            {**VALID, "lag": {"gate": {"min_record": 10, "max_wait_seconds": 60}}},
            "lag.gate.min_record",
            "unknown field (known: max_wait_seconds, min_records, poke_seconds, wait_seconds)",
        ),
        ({**VALID, "name": "Bad", "lag": {"typo": 1}}, "name", f"'Bad' {BAD_NAME}"),
        (
            {**VALID, "lag": {"window_seconds": 0, "gate": {"min_records": 0}}},
            "lag.gate.max_wait_seconds",
            "is required",
        ),
    ],
)
def test_of_several_mistakes_the_first_as_a_mapping_is_read(declaration, field, problem):
    """A field a mapping does not know (the first by name), then one it lacks, then what its fields hold in order."""
    with pytest.raises(DeclarationError) as err:
        parse_pipeline(declaration, "orders.yaml")
    assert (err.value.field, err.value.problem) == (field, problem)


def test_a_value_yaml_aliases_blew_up_is_shown_bounded():
    bomb: list = ["lol"] * 9
    for _ in range(9):
        bomb = [bomb] * 9  # 9**10 strings, were it written out
    with pytest.raises(DeclarationError) as err:
        parse_pipeline({**VALID, "lag": {"window_seconds": bomb}}, "orders.yaml")
    assert err.value.problem.startswith("must be a positive integer, got [[[[") and len(err.value.problem) < 2000


def test_a_schedule_is_kept_without_the_spaces_around_it():
    assert parse_pipeline({**VALID, "schedule": " @daily "}).schedule == "@daily"
