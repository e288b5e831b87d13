"""The local Kafka broker (KRaft, jars from Maven Central), used when no Kafka connection is configured.

Besides its PLAINTEXT listener it has a SASL/PLAIN one, so authenticated clients are tested for real. The SASL
password contains a double quote, a backslash and a non-ASCII letter on purpose: every place that writes it into a
JAAS string or a properties file must quote it right, or clients fail to log in.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from local_platform.config import CONTROLLER_PORT, KAFKA_PORT, KAFKA_SASL_PORT, STATE, private_file
from local_platform.processes import say, spawn, stop, wait_for

from microingest.systems.connections import jaas_quote

SASL_PASSWORD_SUFFIX = '"\\\u00e9'


def reachable(config: dict) -> bool:
    from kafka import KafkaConsumer

    try:
        KafkaConsumer(**config, bootstrap_timeout_ms=3000, request_timeout_ms=5000).close()
        return True
    except Exception:
        return False


def properties_value(value: str) -> str:
    """A value written so that java.util.Properties.load, which decodes backslash escapes and reads ISO-8859-1,
    reads it back unchanged."""
    escaped = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "".join(c if ord(c) < 128 else f"\\u{ord(c):04x}" for c in escaped)


def sasl_settings() -> dict:
    sasl_file = STATE / "kafka" / "sasl.json"
    sasl = json.loads(sasl_file.read_text(encoding="utf-8")) if sasl_file.exists() else {}
    if not sasl.get("password", "").endswith(SASL_PASSWORD_SUFFIX):  # new, or made before the suffix existed
        sasl = {"bootstrap.servers": f"127.0.0.1:{KAFKA_SASL_PORT}", "username": "ingest",
                "password": secrets.token_urlsafe(18) + SASL_PASSWORD_SUFFIX}
        private_file(sasl_file, json.dumps(sasl))
    return sasl


def server_properties(data: Path) -> str:
    sasl = sasl_settings()
    jaas = (f"org.apache.kafka.common.security.plain.PlainLoginModule required "
            f"user_{sasl['username']}={jaas_quote(sasl['password'])};")
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.voters=1@127.0.0.1:{CONTROLLER_PORT}",
        f"listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},CONTROLLER://127.0.0.1:{CONTROLLER_PORT},"
        f"SASL_PLAINTEXT://127.0.0.1:{KAFKA_SASL_PORT}",
        f"advertised.listeners=PLAINTEXT://127.0.0.1:{KAFKA_PORT},SASL_PLAINTEXT://127.0.0.1:{KAFKA_SASL_PORT}",
        "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=PLAINTEXT",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms=PLAIN",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={properties_value(jaas)}",
        f"log.dirs={properties_value(str(data))}",
        "num.partitions=3",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1",
        "group.initial.rebalance.delay.ms=0",
        "log.cleaner.backoff.ms=1000",  # compacted-topic tests need the cleaner to come round quickly
        "auto.create.topics.enable=false",
    ]) + "\n"


LOG4J = "\n".join([
    "rootLogger.level=INFO", "rootLogger.appenderRef.out.ref=out",
    "appender.out.type=Console", "appender.out.name=out",
    "appender.out.layout.type=PatternLayout", "appender.out.layout.pattern=[%d] %p %m (%c)%n",
    "logger.kafka.name=kafka", "logger.kafka.level=WARN",
    "logger.apache.name=org.apache.kafka", "logger.apache.level=WARN",
]) + "\n"


def start() -> dict:
    root = STATE / "kafka"
    libs, data, log = root / "libs", root / "data", root / "broker.log"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise SystemExit(f"[platform] no Kafka broker jars in {libs}; run `make install`")
    props = root / "server.properties"
    private_file(props, server_properties(data))  # it holds the SASL password
    log4j = root / "log4j2.properties"
    log4j.write_text(LOG4J)
    java = [shutil.which("java") or "java", "-Xms256m", "-Xmx768m", f"-Dlog4j2.configurationFile={log4j}",
            "-cp", f"{libs}/*"]
    if not (data / "meta.properties").exists():
        cluster_id = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        say(f"formatting KRaft storage {data} (cluster {cluster_id})")
        # "--cluster-id=<id>": an id starting with "-" (1 in 64 of them) would otherwise read as an option
        subprocess.run([*java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props)],
                       check=True, stdout=subprocess.DEVNULL)
    config = {"bootstrap_servers": [f"127.0.0.1:{KAFKA_PORT}"]}
    if not reachable(config):
        spawn("kafka", [*java, "kafka.Kafka", str(props)], log, dict(os.environ))
    wait_for("Kafka", lambda: reachable(config), 120, log)
    return config


def stop_broker() -> None:
    stop("kafka")
