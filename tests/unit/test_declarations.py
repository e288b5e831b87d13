from pathlib import Path

import pytest

from microingest.declarations import (DeadLetterPolicy, DeclarationError, load_declarations, load_pipeline_file,
                                      load_pipelines, parse_pipeline)

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
        ({"target_table": 'a.b.c'}, "target_table"),
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
    with pytest.raises(DeclarationError, match="field 'name'.*must match the file name"):
        load_pipeline_file(tmp_path / "other.yaml")


def test_invalid_yaml_is_reported_with_the_file(tmp_path):
    (tmp_path / "x.yaml").write_text("name: [unclosed\n")
    with pytest.raises(DeclarationError, match="x.yaml.*not valid YAML"):
        load_pipelines(tmp_path)


def test_repository_declarations_are_valid(monkeypatch):
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(Path(__file__).resolve().parents[2] / "pipelines"))
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
