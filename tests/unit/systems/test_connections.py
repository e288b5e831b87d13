import json
import re

import pytest

from microingest.systems.connections import (
    ConnectionConfigError,
    jaas_quote,
    kafka_python_config,
    parse_connection,
    postgres_params,
    spark_kafka_options,
    to_env_value,
)


def test_postgres_uri_with_encoded_password():
    conn = parse_connection("pg", "postgresql://ingest:p%40ss%2Fword@db.example:6543/warehouse?sslmode=require")
    assert conn.conn_type == "postgres"
    assert postgres_params(conn) == {
        "host": "db.example",
        "port": 6543,
        "dbname": "warehouse",
        "user": "ingest",
        "password": "p@ss/word",
        "sslmode": "require",
        "connect_timeout": 10,
    }


def test_json_form_round_trips_through_the_child_environment_form():
    conn = parse_connection(
        "k",
        '{"conn_type": "kafka", "extra": {"bootstrap.servers": "a:1,b:2", '
        '"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", '
        '"sasl.username": "u", "sasl.password": "s3cret"}}',
    )
    assert parse_connection("k", to_env_value(conn)) == conn
    assert kafka_python_config(conn) == {
        "bootstrap_servers": ["a:1", "b:2"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u",
        "sasl_plain_password": "s3cret",
    }
    options = spark_kafka_options(conn)
    assert options["kafka.bootstrap.servers"] == "a:1,b:2"
    assert options["kafka.sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.PlainLoginModule")


def test_secrets_never_appear_in_repr():
    conn = parse_connection("pg", "postgresql://u:topsecret@h:1/d")
    assert "topsecret" not in repr(conn)


@pytest.mark.parametrize("value", ["not a uri", '{"port": "abc"}', "{broken json"])
def test_bad_connection_values_fail_clearly(value):
    with pytest.raises(ConnectionConfigError, match="connection 'x'"):
        parse_connection("x", value)


def test_kafka_connection_needs_servers():
    with pytest.raises(ConnectionConfigError, match=r"bootstrap.servers"):
        kafka_python_config(parse_connection("x", '{"conn_type": "kafka"}'))


def test_jaas_values_are_quoted_for_kafkas_parser_not_as_json():
    conn = parse_connection(
        "k",
        json.dumps(
            {
                "conn_type": "kafka",
                "extra": {
                    "bootstrap.servers": "a:1",
                    "sasl.mechanism": "PLAIN",
                    "sasl.username": "ingest",
                    "sasl.password": 'p"a\\ss\u00e9',
                },
            }
        ),
    )
    jaas = spark_kafka_options(conn)["kafka.sasl.jaas.config"]
    # StreamTokenizer turns \" into " and \\ into \; it has no \uXXXX escape, so é must stay é.
    assert jaas.endswith(' required username="ingest" password="p\\"a\\\\ss\u00e9";')
    with pytest.raises(ConnectionConfigError, match="line break"):
        jaas_quote("two\nlines")


def _kafka(extra: dict):
    return parse_connection("k", json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": "b:9092", **extra}}))


def test_a_pem_ca_reaches_spark_inline_so_a_clusters_executors_need_no_file(tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    options = spark_kafka_options(_kafka({"security.protocol": "SSL", "ssl.ca.location": str(ca)}))
    assert options["kafka.ssl.truststore.type"] == "PEM"
    assert options["kafka.ssl.truststore.certificates"] == ca.read_text()
    assert "kafka.ssl.truststore.location" not in options
    # a truststore the connection names itself is what Spark gets
    store = {"ssl.ca.location": str(ca), "ssl.truststore.location": "/etc/ts.jks", "ssl.truststore.password": "p"}
    options = spark_kafka_options(_kafka(store))
    assert options["kafka.ssl.truststore.location"] == "/etc/ts.jks"
    assert "kafka.ssl.truststore.certificates" not in options


def test_an_unreadable_ca_file_is_named():
    with pytest.raises(ConnectionConfigError, match=re.escape("connection 'k': ssl.ca.location '/nonexistent/ca.pem'")):
        spark_kafka_options(_kafka({"ssl.ca.location": "/nonexistent/ca.pem"}))
