"""Text lands byte for byte whatever the client's encoding settings say, and a database that cannot hold every text
is refused before anything is written."""

import json
import os
import subprocess
import uuid

import psycopg2
import pytest
from psycopg2 import sql

from microingest.systems.migrations import migrate
from microingest.systems.postgres import DatabaseEncodingError, connection

TEXTS = ["caf\u00e9", "\u4e2d\u6587", "\U0001f600 astral", "\u00ff\u00fe latin-1's last", "plain"]


def test_a_latin1_client_encoding_changes_no_character(env):
    """PGCLIENTENCODING as a shell or a role setting might leave it: the platform's connections speak UTF8 anyway."""
    env.redeclare(dead_letter={"max_fraction": None})
    headers = [("h\u00e9", "v\u00e9".encode())]
    env.send_to(
        0,
        [(t.encode(), json.dumps({"event_id": t, "user_id": "\u00e9"}).encode(), headers) for t in TEXTS]
        + [(b"k", b"\xc3\xa9 is no JSON", [("n\u00e9", b"\xff")])],
    )
    result = env.spark_job(_plan(env), env_extra={"PGCLIENTENCODING": "LATIN1"})
    assert result.returncode == 0, result.stdout[-3000:]
    assert [e for _, _, e in env.landed_once()] == TEXTS
    [(user,)] = env.query(sql.SQL("SELECT DISTINCT user_id FROM {}").format(env.table))
    assert user == "\u00e9"
    [(_, _, cls, _message, key, value, headers)] = env.dead_letters()
    assert (cls, bytes(key), bytes(value)) == ("invalid_json", b"k", b"\xc3\xa9 is no JSON")
    assert headers == [{"key": "n\u00e9", "value_base64": "/w=="}]


def _plan(env):
    from microingest.plan.live import plan_live_run

    return plan_live_run(env.pipeline)


@pytest.fixture
def sql_ascii_database(pg):
    name = f"it_sql_ascii_{uuid.uuid4().hex[:8]}"
    admin = psycopg2.connect(**pg)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(
            sql.SQL("CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0").format(
                sql.Identifier(name)
            )
        )
    yield {**pg, "dbname": name}
    with admin.cursor() as cur:
        cur.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    admin.close()


def test_a_sql_ascii_database_is_refused_before_anything_is_written(sql_ascii_database, tmp_path):
    with pytest.raises(DatabaseEncodingError, match="uses encoding SQL_ASCII"):
        migrate(sql_ascii_database)
    connection_json = json.dumps(
        {
            "conn_type": "postgres",
            "host": sql_ascii_database["host"],
            "port": sql_ascii_database["port"],
            "schema": sql_ascii_database["dbname"],
            "login": sql_ascii_database["user"],
            "password": sql_ascii_database["password"],
        }
    )
    result = subprocess.run(
        ["microingest", "migrate"],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **os.environ,
            "AIRFLOW_CONN_MICROINGEST_POSTGRES": connection_json,
            "MICROINGEST_PIPELINES_DIR": str(tmp_path),
        },
    )
    assert result.returncode == 2 and "uses encoding SQL_ASCII" in result.stderr and "UTF8" in result.stderr
    with connection(sql_ascii_database) as conn, conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_namespace WHERE nspname = 'microingest'")
        assert cur.fetchone() == (0,), "nothing was created"
