"""The schema_registry connection type's hook: the UI's Test button asks the registry, and a registry that does not
answer is reported with the reason, never as an error page."""

import json

from microingest.airflow.schema_registry_hook import SchemaRegistryHook
from microingest.systems.connections import env_name


def test_the_local_registry_answers_the_test(registry):
    ok, message = SchemaRegistryHook().test_connection()
    assert ok, message
    assert message.startswith(f"schema registry at {registry['url']} answered: ")


def test_a_registry_that_does_not_answer_fails_the_test_with_the_reason(monkeypatch):
    conn = {"conn_type": "schema_registry", "host": "127.0.0.1", "port": 9, "login": "ingest", "password": "s3cret"}
    monkeypatch.setenv(env_name("nowhere_registry"), json.dumps(conn))
    ok, message = SchemaRegistryHook("nowhere_registry").test_connection()
    assert not ok
    assert "schema registry at http://127.0.0.1:9 is unreachable" in message
    assert "s3cret" not in message
