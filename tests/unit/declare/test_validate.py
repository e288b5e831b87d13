from pathlib import Path

import pytest

from microingest.declare.files import load_declarations, load_pipeline_file, load_pipelines
from microingest.declare.pipeline import DeadLetterPolicy, DeclarationError
from microingest.declare.validate import parse_pipeline
from microingest.settings import repo_root

VALID = {
    "name": "orders",
    "topic": "shop.orders-v1",
    "target_table": "analytics.orders",
    "schema": {"order_id": {"type": "string", "required": True}, "total": "double"},
}


def test_minimal_declaration_gets_defaults():
    p = parse_pipeline(dict(VALID))
    assert p.dag_id == "microingest_orders"
    assert p.kafka_conn_id == "microingest_kafka" and p.start_from == "earliest" and p.schedule is None
    assert p.value_columns == ("order_id", "total")
    assert (p.sink_mode, p.on_retention_gap, p.max_active_runs, p.retries) == ("append", "fail", 1, 3)
    assert p.dead_letter.exceeded(1, 100) is None and "max_fraction" in p.dead_letter.exceeded(11, 100)


def test_dead_letter_limits_by_count_and_by_fraction():
    both = DeadLetterPolicy(max_records=2, max_fraction=0.5)
    assert both.exceeded(2, 3) == "2 of 3 records bad (66.7%) exceeds dead_letter.max_fraction 0.5"
    assert both.exceeded(3, 1000) == "3 bad records exceed dead_letter.max_records 2"
    assert both.exceeded(2, 1000) is None
    assert DeadLetterPolicy(max_records=None, max_fraction=None).exceeded(10**6, 10**6) is None
    assert DeadLetterPolicy().exceeded(5, 0) is None  # an empty batch has no fraction


def test_table_without_schema_defaults_to_public():
    assert parse_pipeline({**VALID, "target_table": "orders"}).target_table == "public.orders"


@pytest.mark.parametrize(
    "change, field",
    [
        ({"name": None}, "name"),
        ({"topic": "bad topic!"}, "topic"),
        ({"target_table": "orders; DROP TABLE x"}, "target_table"),
        ({"target_table": "a.b.c"}, "target_table"),
        ({"schema": {}}, "schema"),
        ({"schema": {"Bad-Name": "string"}}, "schema.Bad-Name"),
        ({"schema": {"x": "varchar"}}, "schema.x.type"),
        ({"schema": {"x": {"type": "string", "required": "yes"}}}, "schema.x.required"),
        ({"schema": {"source_offset": "integer"}}, "schema.source_offset"),
        ({"max_records_per_batch": 0}, "max_records_per_batch"),
        ({"max_records_per_batch": "100"}, "max_records_per_batch"),
        ({"max_records_per_batch": True}, "max_records_per_batch"),
        ({"start_from": "beginning"}, "start_from"),
        ({"schedule": "every minute"}, "schedule"),
        ({"sink_mode": "merge"}, "sink_mode"),
        ({"kafka_conn_id": "x y"}, "kafka_conn_id"),
        ({"topik": "typo"}, "topik"),
        ({"max_records_per_run": 0}, "max_records_per_run"),
        ({"max_run_seconds": -1}, "max_run_seconds"),
        ({"name": "dead_letters"}, "name"),
        ({"name": "lag_sla"}, "name"),
        ({"lag": {"gate": {"min_records": 10}}}, "lag.gate.max_wait_seconds"),
        ({"lag": {"gate": {"min_records": 0, "max_wait_seconds": 60}}}, "lag.gate.min_records"),
        ({"lag": {"sla": {"grace_seconds": 60}}}, "lag.sla.max_time_lag_seconds"),
        ({"lag": {"sla": {"max_time_lag_seconds": 60, "grace": 5}}}, "lag.sla.grace"),
        ({"lag": {"window_seconds": "1h"}}, "lag.window_seconds"),
        ({"lag": []}, "lag"),
        ({"name": "p" * 55}, "name"),
        ({"target_table": "microingest.ledger"}, "target_table"),
        ({"target_table": "microingest_staging.orders"}, "target_table"),
        ({"target_table": "pg_catalog.pg_class"}, "target_table"),
    ],
)
def test_malformed_declaration_names_the_field(change, field):
    with pytest.raises(DeclarationError) as err:
        parse_pipeline({**VALID, **change}, "orders.yaml")
    assert err.value.field == field
    assert f"field '{field}'" in str(err.value) and "orders.yaml" in str(err.value)


def test_non_mapping_is_rejected():
    with pytest.raises(DeclarationError, match="<root>"):
        parse_pipeline(["not", "a", "mapping"])


def test_file_name_must_match_pipeline_name(tmp_path):
    (tmp_path / "other.yaml").write_text("name: orders\ntopic: t\ntarget_table: t\nschema: {a: string}\n")
    with pytest.raises(DeclarationError, match=r"field 'name'.*must match the file name"):
        load_pipeline_file(tmp_path / "other.yaml")


def test_invalid_yaml_is_reported_with_the_file(tmp_path):
    (tmp_path / "x.yaml").write_text("name: [unclosed\n")
    with pytest.raises(DeclarationError, match=r"x.yaml.*not valid YAML"):
        load_pipelines(tmp_path)


def test_repository_declarations_are_valid(monkeypatch):
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(repo_root() / "pipelines"))
    pipelines = load_pipelines()
    assert "demo_events" in {p.name for p in pipelines}


def test_run_caps_have_defaults_and_can_be_declared():
    p = parse_pipeline(dict(VALID))
    assert (p.max_records_per_run, p.max_run_seconds) == (1_000_000, 1800)
    p = parse_pipeline({**VALID, "max_records_per_run": 5000, "max_run_seconds": 60})
    assert (p.max_records_per_run, p.max_run_seconds) == (5000, 60)


def test_names_that_would_overflow_derived_postgres_names_are_refused_with_the_limit():
    assert parse_pipeline({**VALID, "name": "p" * 54}).name == "p" * 54
    with pytest.raises(DeclarationError, match="at most 54"):
        parse_pipeline({**VALID, "name": "p" * 55})


def test_one_malformed_declaration_fails_alone(tmp_path):
    (tmp_path / "good.yaml").write_text("name: good\ntopic: t\ntarget_table: t\nschema: {a: string}\n")
    (tmp_path / "bad.yaml").write_text("name: bad\ntopic: t\ntarget_table: t\nschema: {a: varchar}\n")
    pipelines, errors = load_declarations(tmp_path)
    assert [p.name for p in pipelines] == ["good"]
    assert [(e.source.endswith("bad.yaml"), e.field) for e in errors] == [(True, "schema.a.type")]
    with pytest.raises(DeclarationError):
        load_pipelines(tmp_path)


GOOD = "name: {name}\ntopic: t\ntarget_table: t\nschema: {{a: string}}\n"
AGGREGATE = (
    "name: {name}\ntopic: t\ntarget_table: t\nsink_mode: aggregate\n"
    "schema: {{k: {{type: string, required: true}}, ts: {{type: timestamp, required: true}}, n: integer}}\n"
    "aggregate: {aggregate}\n"
)
# One file per kind of mistake that used to escape load_declarations (or to pass it and then break every pipeline's
# DAG or the lag page); each must come back as one DeclarationError for its own file.
BAD_FILES = {
    "latin1": b"name: latin1\ntopic: t\ntarget_table: t\nschema: {caf\xe9: string}\n",
    "bucket_list": AGGREGATE.format(
        name="bucket_list", aggregate="{group_by: [k], measures: {c: count}, time_bucket: {field: [ts], width: 1 hour}}"
    ).encode(),
    "sum_list": AGGREGATE.format(name="sum_list", aggregate="{group_by: [k], measures: {total: {sum: [n]}}}").encode(),
    "mixed_keys": (GOOD.format(name="mixed_keys") + "1: one\ntopik: typo\n").encode(),
    "lag_mixed_keys": (GOOD.format(name="lag_mixed_keys") + "lag: {1: one, windw: 5}\n").encode(),
    "top_list": b"- name: top_list\n- topic: t\n",
    "top_scalar": b"just a sentence\n",
    "empty": b"",
    "bad_cron": (GOOD.format(name="bad_cron") + "schedule: 'a b c d e'\n").encode(),
    "once": (GOOD.format(name="once") + "schedule: '@once'\n").encode(),
    "endless_retry": (GOOD.format(name="endless_retry") + "retry_delay_seconds: 1000000000000000\n").encode(),
    "endless_window": (GOOD.format(name="endless_window") + "lag: {window_seconds: 100000000000}\n").encode(),
}


def test_every_kind_of_malformed_file_fails_alone_naming_its_file(tmp_path):
    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    for name, content in BAD_FILES.items():
        (tmp_path / f"{name}.yaml").write_bytes(content)
    (tmp_path / "bad.yaml").mkdir()  # a folder that the pattern matches
    pipelines, errors = load_declarations(tmp_path)
    assert [p.name for p in pipelines] == ["good"]
    expected = sorted([*BAD_FILES, "bad"])
    assert sorted(Path(e.source).stem for e in errors) == expected
    for error in errors:
        assert isinstance(error, DeclarationError) and str(error).startswith(f"{error.source}: field '")
    with pytest.raises(DeclarationError):
        load_pipelines(tmp_path)


def test_file_level_problems_say_what_to_change(tmp_path):
    for name, content in BAD_FILES.items():
        (tmp_path / f"{name}.yaml").write_bytes(content)
    (tmp_path / "bad.yaml").mkdir()
    errors = {Path(e.source).stem: e for e in load_declarations(tmp_path)[1]}
    assert (errors["latin1"].field, errors["latin1"].problem) == (
        "<file>",
        "is not UTF-8 text: byte 0xe9 on line 4; save the file as UTF-8",
    )
    assert errors["bad"].field == "<file>" and "cannot be read" in errors["bad"].problem
    assert "the file is empty" in errors["empty"].problem
    assert "got a list" in errors["top_list"].problem and "got text" in errors["top_scalar"].problem


def test_an_unexpected_failure_while_loading_a_file_is_that_files_error(tmp_path, monkeypatch):
    from microingest.declare import validate

    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    (tmp_path / "odd.yaml").write_text(GOOD.format(name="odd"))
    real = validate.parse_pipeline

    def parse(raw, source="<declaration>"):
        if source.endswith("odd.yaml"):
            raise KeyError("a gap in validation")
        return real(raw, source)

    monkeypatch.setattr(validate, "parse_pipeline", parse)
    pipelines, errors = load_declarations(tmp_path)
    assert [p.name for p in pipelines] == ["good"]
    assert [str(e) for e in errors] == [
        f"{tmp_path / 'odd.yaml'}: field '<file>': could not be loaded: KeyError: 'a gap in validation'"
    ]


def test_a_pipeline_declared_twice_is_an_error_of_the_second_file(tmp_path):
    (tmp_path / "twice.yaml").write_text(GOOD.format(name="twice"))
    (tmp_path / "twice.yml").write_text(GOOD.format(name="twice"))
    pipelines, errors = load_declarations(tmp_path)
    assert [p.name for p in pipelines] == ["twice"]
    assert [(Path(e.source).name, e.field) for e in errors] == [("twice.yml", "name")]
    assert "also declared in" in errors[0].problem


AGGREGATE_SCHEMA = {
    "k": {"type": "string", "required": True},
    "ts": {"type": "timestamp", "required": True},
    "n": "integer",
}


def aggregate(**spec):
    return {
        **VALID,
        "sink_mode": "aggregate",
        "schema": AGGREGATE_SCHEMA,
        "aggregate": {"group_by": ["k"], "measures": {"c": "count"}, **spec},
    }


@pytest.mark.parametrize(
    "declaration, field, problem",
    [
        (
            aggregate(time_bucket={"field": ["ts"], "width": "1 hour"}),
            "aggregate.time_bucket.field",
            "must be a field name (text), got a list",
        ),
        (
            aggregate(measures={"total": {"sum": ["n"]}}),
            "aggregate.measures.total.sum",
            "must name a numeric field of the schema (text), got a list",
        ),
        (
            aggregate(measures={"total": {"sum": {"n": 1}}}),
            "aggregate.measures.total.sum",
            "must name a numeric field of the schema (text), got a mapping",
        ),
        (aggregate(group_by=["k", "k"]), "aggregate.group_by", "'k' is listed twice"),
        (aggregate(group_by="k"), "aggregate.group_by", "must be a list of schema field names, got text ('k')"),
        (
            {
                **aggregate(time_bucket={"field": "ts", "width": "1 hour"}, group_by=["bucket_start"]),
                "schema": {**AGGREGATE_SCHEMA, "bucket_start": {"type": "string", "required": True}},
            },
            "aggregate.group_by",
            "'bucket_start' clashes with the time bucket's column; rename the field",
        ),
        ({**VALID, 1: "one", "topik": "typo"}, "1", "names must be text, got a number (1); put the name in quotes"),
        (
            {**VALID, True: "x"},
            "true",
            "names must be text, got a boolean (true: YAML reads unquoted yes, no, on, "
            "off, true and false so); put the name in quotes",
        ),
        (
            {**VALID, "lag": {1: "one", "windw": 5}},
            "lag.1",
            "names must be text, got a number (1); put the name in quotes",
        ),
        (
            {**VALID, "schema": {float("inf"): "double"}},
            "schema.inf",
            "names must be text, got a number (inf); put the name in quotes",
        ),
        (
            {**VALID, "dead_letter": {None: 1}},
            "dead_letter.null",
            "names must be text, got nothing (null); put the name in quotes",
        ),
        ({**VALID, "name": ["orders"]}, "name", "must be text, got a list"),
        (
            {**VALID, "schedule": "a b c d e"},
            "schedule",
            "'a b c d e' is not a valid cron expression: [a b c d e] is not acceptable",
        ),
        ({**VALID, "schedule": "0 0 30 2 *"}, "schedule", "'0 0 30 2 *' never fires"),
        (
            {**VALID, "schedule": "@once"},
            "schedule",
            "must be a cron expression, @preset (@hourly, @daily, @weekly, @monthly, @yearly) or on_records, "
            "got '@once'",
        ),
        (
            {**VALID, "retry_delay_seconds": 10**15},
            "retry_delay_seconds",
            "must be at most 315,360,000 (ten years), got 1000000000000000",
        ),
        (
            {**VALID, "max_run_seconds": 10**12},
            "max_run_seconds",
            "must be at most 315,360,000 (ten years), got 1000000000000",
        ),
        (
            {**VALID, "lag": {"window_seconds": 10**11}},
            "lag.window_seconds",
            "must be at most 315,360,000 (ten years), got 100000000000",
        ),
        (
            {**VALID, "lag": {"gate": {"min_records": 1, "max_wait_seconds": 10**14}}},
            "lag.gate.max_wait_seconds",
            "must be at most 315,360,000 (ten years), got 100000000000000",
        ),
    ],
)
def test_wrong_yaml_types_and_values_get_a_precise_error(declaration, field, problem):
    with pytest.raises(DeclarationError) as err:
        parse_pipeline(declaration, "orders.yaml")
    assert (err.value.field, err.value.problem) == (field, problem)


def test_a_recursive_yaml_alias_is_an_error_not_a_hang(tmp_path):
    (tmp_path / "loop.yaml").write_text("name: loop\ntopic: t\ntarget_table: t\nschema: &s {a: *s}\n")
    errors = load_declarations(tmp_path)[1]
    assert [e.field for e in errors] == ["schema.a"]


STAGING_COLUMNS = (
    "source_topic",
    "source_partition",
    "source_offset",
    "kafka_timestamp",
    "batch_id",
    "record_key",
    "is_tombstone",
)


@pytest.mark.parametrize("column", STAGING_COLUMNS)
def test_every_staging_column_name_is_refused_as_a_schema_field(column):
    with pytest.raises(DeclarationError) as err:
        parse_pipeline({**VALID, "schema": {**VALID["schema"], column: "string"}}, "orders.yaml")
    assert err.value.field == f"schema.{column}"
    assert err.value.problem.startswith(f"'{column}' is reserved: the platform's staging table uses it for ")
    assert err.value.problem.endswith("; leave it out of the schema")


def test_the_reserved_names_are_a_decoded_rows_own_columns():
    from microingest.batches import ROW_COLUMNS

    assert ROW_COLUMNS == STAGING_COLUMNS


def test_a_pipelines_folder_that_is_not_there_is_an_error_saying_where_to_set_one(tmp_path):
    pipelines, errors = load_declarations(tmp_path / "nowhere")
    assert pipelines == []
    assert [(e.field, e.problem) for e in errors] == [
        (
            "<folder>",
            "is not a folder; set MICROINGEST_PIPELINES_DIR or [microingest] pipelines_dir in Airflow's configuration",
        )
    ]
