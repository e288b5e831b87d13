"""Airflow connections -> client settings for psycopg2, kafka-python and Spark's Kafka source.

Connections are looked up the way Airflow does: `AIRFLOW_CONN_<ID>` environment variables first (URI or JSON), then
the Airflow metastore through the Task SDK. The result is a plain `ConnectionInfo` so the Spark job, which runs
outside Airflow, uses the same translation code as the Airflow tasks.

Passwords never appear in `repr()` of anything here, so an accidental log line cannot leak them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from microingest.errors import Refused


class ConnectionConfigError(Refused):
    pass


@dataclass(frozen=True)
class ConnectionInfo:
    conn_id: str
    conn_type: str = ""
    host: str = ""
    port: int | None = None
    login: str = ""
    password: str = field(default="", repr=False)
    schema: str = ""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)


def parse_connection(conn_id: str, value: str) -> ConnectionInfo:
    """Parse an AIRFLOW_CONN_* value: Airflow's URI form or its JSON form."""
    value = value.strip()
    if value.startswith("{"):
        try:
            d = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConnectionConfigError(f"connection '{conn_id}': invalid JSON ({exc.msg} at {exc.pos})") from None
        extra = d.get("extra") or {}
        if isinstance(extra, str):
            extra = json.loads(extra) if extra else {}
        return ConnectionInfo(
            conn_id,
            d.get("conn_type", ""),
            d.get("host") or "",
            _port(conn_id, d.get("port")),
            d.get("login") or "",
            d.get("password") or "",
            d.get("schema") or "",
            extra,
        )
    parts = urlsplit(value)
    if not parts.scheme:
        raise ConnectionConfigError(
            f"connection '{conn_id}': expected a URI like scheme://user:pass@host:port/db or JSON"
        )
    extra = dict(parse_qsl(parts.query))
    if "__extra__" in extra:
        extra = json.loads(extra["__extra__"])
    conn_type = parts.scheme.replace("-", "_")
    if conn_type == "postgresql":
        conn_type = "postgres"
    return ConnectionInfo(
        conn_id,
        conn_type,
        unquote(parts.hostname or ""),
        _port(conn_id, parts.port),
        unquote(parts.username or ""),
        unquote(parts.password or ""),
        unquote(parts.path.lstrip("/")),
        extra,
    )


def _port(conn_id: str, port: Any) -> int | None:
    if port in (None, ""):
        return None
    try:
        return int(port)
    except (TypeError, ValueError):
        raise ConnectionConfigError(f"connection '{conn_id}': port must be a number, got {port!r}") from None


def get_connection(conn_id: str) -> ConnectionInfo:
    env = os.environ.get(env_name(conn_id))
    if env:
        return parse_connection(conn_id, env)
    try:
        from airflow.sdk import Connection
    except ImportError:
        raise ConnectionConfigError(
            f"connection '{conn_id}' is not defined (set AIRFLOW_CONN_{conn_id.upper()})"
        ) from None
    conn = Connection.get(conn_id)
    return ConnectionInfo(
        conn_id,
        conn.conn_type or "",
        conn.host or "",
        conn.port,
        conn.login or "",
        conn.password or "",
        conn.schema or "",
        dict(conn.extra_dejson or {}),
    )


# --- Postgres -------------------------------------------------------------------------------------------------


def postgres_params(conn: ConnectionInfo) -> dict[str, Any]:
    """psycopg2.connect() keyword arguments."""
    params: dict[str, Any] = {
        "host": conn.host or "127.0.0.1",
        "port": conn.port or 5432,
        "dbname": conn.schema or "postgres",
    }
    if conn.login:
        params["user"] = conn.login
    if conn.password:
        params["password"] = conn.password
    for key in ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name"):
        if key in conn.extra:
            params[key] = conn.extra[key]
    params.setdefault("connect_timeout", 10)
    return params


# --- Kafka ----------------------------------------------------------------------------------------------------
# Extra keys follow the librdkafka/Java client names the Airflow Kafka provider uses ("bootstrap.servers", ...).

_KAFKA_PYTHON_KEYS = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
}


def kafka_bootstrap(conn: ConnectionInfo) -> str:
    servers = conn.extra.get("bootstrap.servers") or (f"{conn.host}:{conn.port or 9092}" if conn.host else "")
    if not servers:
        raise ConnectionConfigError(f"connection '{conn.conn_id}': no 'bootstrap.servers' in extra and no host")
    return servers


def kafka_python_config(conn: ConnectionInfo) -> dict[str, Any]:
    """kafka-python client keyword arguments."""
    config: dict[str, Any] = {"bootstrap_servers": kafka_bootstrap(conn).split(",")}
    for key, name in _KAFKA_PYTHON_KEYS.items():
        if key in conn.extra:
            config[name] = conn.extra[key]
    return config


def spark_kafka_options(conn: ConnectionInfo) -> dict[str, str]:
    """Options for spark.read.format("kafka"): consumer properties carry the 'kafka.' prefix."""
    options = {"kafka.bootstrap.servers": kafka_bootstrap(conn)}
    for key in (
        "group.id",  # for group-based authorization: it wins over the platform's reader group (`spark.batch`)
        "security.protocol",
        "sasl.mechanism",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.location",
        "ssl.keystore.password",
    ):
        if key in conn.extra:
            options[f"kafka.{key}"] = str(conn.extra[key])
    if "ssl.ca.location" in conn.extra and "ssl.truststore.location" not in conn.extra:
        # The CA's certificates travel inline, read here: the executors (a cluster's) need no file of this machine.
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.certificates"] = _read_ca(conn)
    if "sasl.username" in conn.extra:
        module = (
            "org.apache.kafka.common.security.scram.ScramLoginModule"
            if str(conn.extra.get("sasl.mechanism", "")).startswith("SCRAM")
            else "org.apache.kafka.common.security.plain.PlainLoginModule"
        )
        user = jaas_quote(str(conn.extra["sasl.username"]))
        password = jaas_quote(str(conn.extra.get("sasl.password", "")))
        options["kafka.sasl.jaas.config"] = f"{module} required username={user} password={password};"
    return options


def _read_ca(conn: ConnectionInfo) -> str:
    path = str(conn.extra["ssl.ca.location"])
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        raise ConnectionConfigError(f"connection '{conn.conn_id}': ssl.ca.location {path!r}: {exc.strerror}") from exc


def jaas_quote(value: str) -> str:
    """A JAAS option value the way Kafka's JaasConfig parser (java.io.StreamTokenizer) reads it back unchanged:
    double-quoted, with backslash and double quote escaped by a backslash. Other characters, non-ASCII included,
    stay as they are; the parser decodes no \\uXXXX escapes (JSON quoting would change such a password)."""
    if "\n" in value or "\r" in value:
        raise ConnectionConfigError("a JAAS option value cannot contain a line break")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def to_env_value(conn: ConnectionInfo) -> str:
    """The JSON form of AIRFLOW_CONN_<ID>, for handing a resolved connection to a child process's environment."""
    return json.dumps(
        {
            "conn_type": conn.conn_type,
            "host": conn.host,
            "port": conn.port,
            "login": conn.login,
            "password": conn.password,
            "schema": conn.schema,
            "extra": conn.extra,
        }
    )


def env_name(conn_id: str) -> str:
    return f"AIRFLOW_CONN_{conn_id.upper()}"


# --- Schema registry ------------------------------------------------------------------------------------------
# An HTTP connection: extra "url" (the Confluent-compatible API's base, e.g. http://host:8081 or Apicurio's
# http://host:8080/apis/ccompat/v7), or scheme (the connection's schema field, default http), host and port.


def schema_registry_config(conn: ConnectionInfo) -> dict[str, str]:
    """confluent_kafka SchemaRegistryClient settings; login and password become basic auth."""
    url = conn.extra.get("url")
    if not url:
        if not conn.host:
            raise ConnectionConfigError(f"connection '{conn.conn_id}': no 'url' in extra and no host")
        url = f"{conn.schema or 'http'}://{conn.host}" + (f":{conn.port}" if conn.port else "")
    config = {"url": str(url).rstrip("/")}
    if conn.login:
        config["basic.auth.user.info"] = f"{conn.login}:{conn.password}"
    return config
