"""Credentials and names: SASL settings flow from the Airflow connection to kafka-python and Spark, secrets stay out
of output, command lines and readable files, injection attempts in declarations are rejected before anything runs, and
the lag page's app lets nothing through without a token signed with the platform's key."""

import json
import os
import re
import stat
import subprocess
import threading
from pathlib import Path

import jwt
import pytest

from helpers.airflow_access import get, run_dag
from microingest import settings
from microingest.systems.connections import jaas_quote


@pytest.fixture
def env(submit_env):
    """The password must stay off spark-submit's command line and reach Spark's Kafka source through it."""
    return submit_env


@pytest.fixture
def sasl(monkeypatch):
    path = settings.state_dir() / "kafka" / "sasl.json"
    if not path.exists():
        pytest.skip("the configured Kafka is not this platform's broker, which has the SASL listener")
    sasl = json.loads(path.read_text())

    def use(password):
        monkeypatch.setenv(
            "AIRFLOW_CONN_MICROINGEST_KAFKA_SASL",
            json.dumps(
                {
                    "conn_type": "kafka",
                    "extra": {
                        "bootstrap.servers": sasl["bootstrap.servers"],
                        "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "PLAIN",
                        "sasl.username": sasl["username"],
                        "sasl.password": password,
                    },
                }
            ),
        )

    use(sasl["password"])
    return sasl, use


class ArgvWatch(threading.Thread):
    """Reads every process's command line (/proc/*/cmdline) while a job runs, looking for a secret."""

    def __init__(self, secrets: list[str], marker: str):
        super().__init__(daemon=True)
        self.secrets, self.marker = [s for s in secrets if s], marker
        self.leaks: list[str] = []
        self.saw_marker = False
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(0.1):
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    argv = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except OSError:
                    continue
                self.saw_marker |= self.marker in argv
                self.leaks += [argv[:200] for s in self.secrets if s in argv]

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join()


def test_sasl_through_airflow_reaches_kafka_python_and_spark_and_the_password_is_on_no_command_line(env, sasl):
    """The broker's SASL password holds a double quote, a backslash and a non-ASCII letter: kafka-python (plan)
    and Spark's Kafka source (JAAS string) must both log in with it unchanged."""
    secrets, _ = sasl
    password = secrets["password"]
    assert '"' in password and "\\" in password and not password.isascii()
    env.redeclare(kafka_conn_id="microingest_kafka_sasl")
    produced = env.produce(500)

    forms = [password, json.dumps(password)[1:-1], jaas_quote(password)[1:-1], env.pg["password"]]
    with ArgvWatch(forms, marker="ingest_job.py") as watch:
        result = run_dag(env)

    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert env.target_rows() == sorted(produced)
    assert watch.saw_marker, "the watch never saw the Spark job's processes"
    assert watch.leaks == [], "credentials on a command line"
    assert not any(form in result.stdout + result.stderr for form in forms)


def test_files_holding_secrets_are_private_to_their_owner():
    state = settings.state_dir()
    files = [
        state / "platform.env",
        state / "airflow" / "passwords.json",
        state / "airflow" / "secrets.json",
        state / "kafka" / "server.properties",
        state / "kafka" / "sasl.json",
        state / "postgres" / "password",
    ]
    present = [f for f in files if f.exists()]  # the Kafka and Postgres files exist unless those are configured
    assert files[:3] == present[:3]
    assert {str(f): oct(stat.S_IMODE(f.stat().st_mode)) for f in present} == {str(f): "0o600" for f in present}


def test_wrong_sasl_password_fails_clearly_and_commits_nothing(env, sasl):
    _, use = sasl
    use("not-the-password")
    env.redeclare(kafka_conn_id="microingest_kafka_sasl")
    env.produce(20)
    result = subprocess.run(
        ["microingest", "plan", env.pipeline.name], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert result.returncode == 2 and "microingest: error: Kafka at 127.0.0.1:9094" in result.stderr
    assert "not-the-password" not in result.stderr
    assert env.ledger() == {} and env.batches() == []


@pytest.mark.parametrize(
    "field, value",
    [
        ("target_table", "public.x; DROP TABLE microingest.ledger"),
        ("topic", "events' OR '1'='1"),
        ("schema", {'amount"; DROP TABLE x; --': "double"}),
        ("name", 'x"; DROP SCHEMA microingest CASCADE; --'),
    ],
)
def test_injection_attempts_in_a_declaration_are_rejected_before_anything_runs(env, field, value):
    path = env.pipelines_dir / f"{env.pipeline.name}.yaml"
    path.write_text(json.dumps({**json.loads(path.read_text()), field: value}))
    result = subprocess.run(["microingest", "plan", env.pipeline.name], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    shown = field if field != "schema" else "schema."
    assert f"field '{shown}" in result.stderr and re.search(r"is not a (valid|table)", result.stderr)
    assert env.query("SELECT to_regclass('microingest.ledger') IS NOT NULL") == [(True,)]
    assert env.ledger() == {} and env.batches() == []


# docker-compose.yml's JWT_SECRET default before issue 20: public, so anyone could sign an admin token with it.
OLD_COMPOSE_JWT_SECRET = "change-me-in-production"


def minted(key: str, like: str) -> str:
    """A token made by Airflow's own JWTGenerator (jti, iss, aud, nbf, exp, iat, kid, alg as the api-server sets
    them) for the user of the issued token `like`, signed with `key`."""
    from airflow.api_fastapi.auth.tokens import JWTGenerator

    issued = jwt.decode(like, options={"verify_signature": False})
    user = {k: issued[k] for k in ("sub", "role", "teams") if k in issued}
    return JWTGenerator(secret_key=key, valid_for=300, audience=issued["aud"]).generate(extras=user)


def minted_with_the_platform_key(like: str) -> str:
    from airflow.configuration import conf

    return minted(conf.get("api_auth", "jwt_secret"), like)  # kept out of the asserts: pytest would print it


def test_a_token_signed_with_the_old_compose_default_key_is_refused_by_the_lag_page(api):
    assert get("/microingest/lag.json", token=api.token)[0] == 200
    # The same claims with the platform's key pass, so the forged token below is refused for its key alone.
    control = get("/microingest/lag.json", token=minted_with_the_platform_key(api.token))[0]
    assert control == 200
    forged = minted(OLD_COMPOSE_JWT_SECRET, api.token)
    assert jwt.get_unverified_header(forged) == jwt.get_unverified_header(api.token)
    for path in ("/microingest/lag", "/microingest/lag.json"):
        assert get(path, token=forged)[0] in (401, 403), path


@pytest.mark.parametrize("path", ["/microingest/docs", "/microingest/redoc", "/microingest/openapi.json"])
def test_the_lag_apps_api_docs_are_not_served_without_a_login(path):
    status, body = get(path)
    assert status != 200 and "openapi" not in body.lower(), (status, body[:200])
