"""Where many pipelines are served together (the DAG file, the lag page), one malformed declaration fails alone."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from test_validate import BAD_FILES, GOOD


@pytest.fixture(autouse=True)
def postgres_connection(monkeypatch):
    """The DAGs name their target Asset by the Postgres connection's host (no server is reached)."""
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_POSTGRES", "postgresql://u:p@db.example:5432/warehouse")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A pipelines folder of one good declaration and every kind of malformed one."""
    for name, content in BAD_FILES.items():
        (tmp_path / f"{name}.yaml").write_bytes(content)
    (tmp_path / "bad.yaml").mkdir()
    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(tmp_path))
    return tmp_path


def test_the_dag_file_builds_the_valid_pipelines_and_reports_the_others(folder):
    from microingest.airflow.dag_factory import build_dags, declaration_errors

    (folder / "good.yaml").write_text(GOOD.format(name="good"))
    dags = build_dags()
    assert sorted(dags) == ["microingest_good"]
    dags["microingest_good"].validate()  # what the dag-processor does with each DAG before keeping it
    assert len(declaration_errors()) == len(BAD_FILES) + 1


def test_a_pipeline_whose_postgres_connection_is_missing_fails_alone(tmp_path, monkeypatch):
    from microingest.airflow.dag_factory import build_dags, declaration_errors

    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(tmp_path))
    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    (tmp_path / "elsewhere.yaml").write_text(GOOD.format(name="elsewhere") + "postgres_conn_id: nowhere\n")
    dags = build_dags()
    assert sorted(dags) == ["microingest_good"]
    assert (
        dags["microingest_good"].get_task("announce").outlets[0].uri == "postgres://db.example:5432/warehouse/public/t"
    )
    [error] = declaration_errors()
    assert "elsewhere.yaml" in str(error) and "postgres_conn_id" in str(error) and "nowhere" in str(error)


def test_a_topic_longer_than_an_airflow_tag_does_not_take_the_dag_file_down(tmp_path, monkeypatch):
    from microingest.airflow.dag_factory import build_dags

    monkeypatch.setenv("MICROINGEST_PIPELINES_DIR", str(tmp_path))
    (tmp_path / "good.yaml").write_text(GOOD.format(name="good"))
    # A Kafka topic may have 249 characters, an Airflow tag at most 100.
    (tmp_path / "long_topic.yaml").write_text(GOOD.format(name="long_topic").replace("topic: t", "topic: " + "t" * 249))
    dags = build_dags()
    assert sorted(dags) == ["microingest_good", "microingest_long_topic"]
    assert dags["microingest_long_topic"].tags == {"microingest", "topic:" + "t" * 94}


def test_the_lag_page_shows_the_malformed_declarations_instead_of_failing(folder):
    from airflow.api_fastapi.app import create_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    from microingest.airflow import lag_page as page

    create_auth_manager()  # the configured one: Airflow's simple auth manager here, whose admin reads every DAG
    admin = SimpleAuthManagerUser(username="admin", role="admin")
    html = page.lag_page(admin)
    for name in [*BAD_FILES, "bad"]:
        assert f"{folder / name}.yaml: field &#39;" in html
    assert "Malformed declarations" in html and "No pipelines declared." not in html
    assert page.lag_json(admin).body == b"[]"
    # a user who may read no DAG sees none of them: the errors name every pipeline's files
    assert "Malformed declarations" not in page.lag_page(SimpleAuthManagerUser(username="nobody", role=None))


def test_declaration_errors_are_escaped_on_the_page():
    from microingest.airflow.lag_page import render

    html = render([], datetime(2026, 11, 23, tzinfo=timezone.utc), ["x.yaml: field 'name': got '<script>'"])
    assert "&lt;script&gt;" in html and "<script>" not in html


def test_validate_names_every_malformed_file_and_fails(folder, capsys):
    from microingest.cli.main import main

    (folder / "good.yaml").write_text(GOOD.format(name="good"))
    assert main(["validate"]) == 2
    out = capsys.readouterr().out
    assert "ok  good:" in out and f"1 pipeline declaration(s) valid, {len(BAD_FILES) + 1} malformed" in out
    assert all(f"{name}.yaml" in out for name in BAD_FILES) and "bad.yaml" in out
