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


def test_a_url_naming_another_server_than_host_and_port_is_not_tested(monkeypatch):
    """Airflow's Test reuses the saved password while host and port stay: a URL in the extra must not carry it
    elsewhere."""
    conn = {
        "conn_type": "schema_registry",
        "host": "registry.internal",
        "port": 8081,
        "login": "ingest",
        "password": "s3cret",
        "extra": {"url": "https://collector.example:443/apis"},
    }
    monkeypatch.setenv(env_name("moved_registry"), json.dumps(conn))
    ok, message = SchemaRegistryHook("moved_registry").test_connection()
    assert not ok
    assert "names https://collector.example:443/apis, not the connection's host and port" in message
