"""A pipeline's connections, resolved once: what its parts need, and how they reach a child process."""

from microingest.declare.validate import parse_pipeline
from microingest.systems.connections import parse_connection
from microingest.systems.pipeline_systems import PipelineSystems

PIPELINE_DECLARED = {
    "name": "orders",
    "topic": "orders",
    "target_table": "public.orders",
    "schema": {"order_id": "string"},
    "postgres_conn_id": "pg",
    "kafka_conn_id": "kafka",
}
PIPELINE = parse_pipeline(PIPELINE_DECLARED)


def resolved(monkeypatch) -> PipelineSystems:
    monkeypatch.setenv("AIRFLOW_CONN_PG", "postgres://ingest:s3cr%40t@db.internal:6543/warehouse")
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA",
        '{"conn_type": "kafka", "extra": {"bootstrap.servers": "k1:9092,k2:9092",'
        ' "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",'
        ' "sasl.username": "u", "sasl.password": "p"}}',
    )
    return PipelineSystems.of(PIPELINE)


def test_each_client_gets_its_own_settings_from_one_resolution(monkeypatch):
    systems = resolved(monkeypatch)
    assert systems.postgres == {
        "host": "db.internal",
        "port": 6543,
        "dbname": "warehouse",
        "user": "ingest",
        "password": "s3cr@t",
        "connect_timeout": 10,
    }
    assert systems.kafka_client["bootstrap_servers"] == ["k1:9092", "k2:9092"]
    assert systems.spark_kafka["kafka.bootstrap.servers"] == "k1:9092,k2:9092"


def test_a_child_process_gets_the_same_connections_from_its_environment_and_no_log_line_shows_a_secret(monkeypatch):
    systems = resolved(monkeypatch)
    env = systems.as_env()
    assert set(env) == {"AIRFLOW_CONN_PG", "AIRFLOW_CONN_KAFKA"}
    assert parse_connection("pg", env["AIRFLOW_CONN_PG"]) == systems.postgres_connection
    assert parse_connection("kafka", env["AIRFLOW_CONN_KAFKA"]) == systems.kafka_connection
    assert "s3cr@t" not in repr(systems) and "'p'" not in repr(systems)


def test_a_registry_connection_gives_the_client_its_url_and_basic_auth():
    from microingest.systems.connections import schema_registry_config

    local = parse_connection("r", '{"conn_type": "http", "extra": {"url": "http://127.0.0.1:18081/apis/ccompat/v7/"}}')
    assert schema_registry_config(local) == {"url": "http://127.0.0.1:18081/apis/ccompat/v7"}
    theirs = parse_connection("r", "http://reader:p%40ss@registry.internal:8081/https")
    assert schema_registry_config(theirs) == {
        "url": "https://registry.internal:8081",
        "basic.auth.user.info": "reader:p@ss",
    }


def test_only_a_pipeline_reading_framed_values_resolves_the_registry(monkeypatch):
    resolved(monkeypatch)
    monkeypatch.setenv("AIRFLOW_CONN_MICROINGEST_SCHEMA_REGISTRY", '{"conn_type": "http", "host": "registry"}')
    assert PipelineSystems.of(PIPELINE).registry is None
    framed = PipelineSystems.of(parse_pipeline({**PIPELINE_DECLARED, "value_format": "avro"}))
    assert framed.registry == {"url": "http://registry"}
    assert "AIRFLOW_CONN_MICROINGEST_SCHEMA_REGISTRY" in framed.as_env()
