"""The local platform launcher (scripts/services.py): a configured server that is down is an error, not a reason to
start a throw-away one; the admin password is shown to people who ask, not in `make up`'s output."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from microingest.settings import repo_root

REPO = repo_root()
SERVICES = [sys.executable, str(REPO / "scripts" / "services.py")]


def launcher(state: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    return subprocess.run(
        [*SERVICES, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, "MICROINGEST_STATE": str(state), **env},
    )


@pytest.mark.parametrize(
    "conn, value, shown",
    [
        ("AIRFLOW_CONN_MICROINGEST_POSTGRES", "postgresql://u:p@127.0.0.1:1/warehouse", "Postgres"),
        (
            "AIRFLOW_CONN_MICROINGEST_KAFKA",
            '{"conn_type": "kafka", "extra": {"bootstrap.servers": "127.0.0.1:1"}}',
            "Kafka",
        ),
    ],
)
def test_an_unreachable_configured_server_fails_up_and_nothing_local_starts(tmp_path, conn, value, shown):
    state = tmp_path / "state"
    result = launcher(state, "up", "--no-airflow-services", **{conn: value})
    assert result.returncode != 0
    assert f"the configured {shown} ({conn}, 127.0.0.1:1) is unreachable" in result.stderr
    assert "p@127" not in result.stderr + result.stdout
    assert not (state / "platform.env").exists()
    assert not (state / "postgres").exists() and not (state / "kafka").exists()


def test_the_admin_password_is_shown_by_status_but_not_by_what_up_prints(tmp_path):
    state = tmp_path / "state"
    (state / "airflow").mkdir(parents=True)
    (state / "airflow" / "passwords.json").write_text(json.dumps({"admin": "pw-Xq7"}))
    asked = launcher(state, "status")
    assert asked.returncode == 0 and "login: user admin, password pw-Xq7" in asked.stdout
    after_up = subprocess.run(
        [sys.executable, "-c", "import services; services.status(show_password=False)"],
        cwd=REPO / "scripts",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MICROINGEST_STATE": str(state)},
    )
    assert after_up.returncode == 0, after_up.stderr
    assert "login: user admin, password in" in after_up.stdout and "pw-Xq7" not in after_up.stdout


def test_up_starts_the_local_spark_connect_server_for_the_pipelines_that_select_it(tmp_path, monkeypatch):
    """The long-lived driver is the default: a pipeline that names no Spark connection runs on it."""
    import services

    folder = tmp_path / "pipelines"
    folder.mkdir()
    for name, spark in (
        ("a_default", None),
        ("on_connect", "microingest_spark"),
        ("on_submit", "microingest_spark_submit"),
    ):
        (folder / f"{name}.yaml").write_text(
            json.dumps(
                {
                    "name": name,
                    "topic": "t",
                    "target_table": f"public.{name}",
                    "schema": {"id": "string"},
                    **({"spark_conn_id": spark} if spark else {}),
                }
            )
        )
    (folder / "broken.yaml").write_text("name: [")
    assert sorted(services.selects_local_spark_connect(folder)) == ["a_default", "on_connect"]


def test_up_starts_the_local_schema_registry_for_the_pipelines_that_read_framed_values(tmp_path, monkeypatch):
    import services

    folder = tmp_path / "pipelines"
    folder.mkdir()
    for name, declared in (
        ("avro", {"value_format": "avro"}),
        ("json", {}),
        ("elsewhere", {"value_format": "avro", "schema_registry_conn_id": "their_registry"}),
    ):
        (folder / f"{name}.yaml").write_text(
            json.dumps(
                {"name": name, "topic": "t", "target_table": f"public.{name}", "schema": {"id": "string"}, **declared}
            )
        )
    assert services.reads_local_registry(folder) == ["avro"]


def test_the_services_without_authentication_inherit_no_credential():
    """The Spark Connect server starts with this environment (the schema registry with less still)."""
    from local_platform.processes import without_credentials

    given = {
        "PATH": "/bin",
        "JAVA_HOME": "/jdk",
        "MICROINGEST_STATE": "/s",
        "AIRFLOW_CONN_MICROINGEST_POSTGRES": "x",
        "AIRFLOW__API_AUTH__JWT_SECRET": "x",
        "AIRFLOW__API__SECRET_KEY": "x",
        "AIRFLOW__CORE__FERNET_KEY": "x",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql://u:p@h/db",
        "AIRFLOW_HOME": "/a",
        "MICROINGEST_AIRFLOW_PASSWORD": "x",
        "PGPASSWORD": "x",
        "SOME_API_TOKEN": "x",
    }
    assert without_credentials(given) == {"PATH": "/bin", "JAVA_HOME": "/jdk", "MICROINGEST_STATE": "/s"}
