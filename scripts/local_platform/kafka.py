"""The local Kafka brokers (KRaft, jars from Maven Central), used when no Kafka connection is configured: one, or
three in the cluster topology, each broker and controller at once, with replication factor 3 and min.insync.replicas
2 (a topic stays writable with acks=all while one broker is down).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from local_platform.config import (
    CONTROLLER_PORT,
    INSTALLED,
    KAFKA_NODES,
    KAFKA_PORT,
    KAFKA_SASL_PORT,
    STATE,
    private_file,
)
from local_platform.processes import say, spawn, stop, wait_for
from microingest.systems.connections import jaas_quote

SASL_PASSWORD_SUFFIX = '"\\\u00e9'


def nodes() -> list[int]:
    return list(range(1, KAFKA_NODES + 1))


def name(node: int) -> str:
    return "kafka" if KAFKA_NODES == 1 else f"kafka-{node}"


def node_dir(node: int) -> Path:
    return STATE / "kafka" if KAFKA_NODES == 1 else STATE / "kafka" / f"node-{node}"


def port(node: int, first: int = KAFKA_PORT) -> int:
    return first + 100 * (node - 1)


def log_file(node: int) -> Path:
    return node_dir(node) / "broker.log"


def bootstrap_servers(listener_port: int = KAFKA_PORT) -> list[str]:
    return [f"127.0.0.1:{port(n, listener_port)}" for n in nodes()]


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
        sasl = {
            "bootstrap.servers": ",".join(bootstrap_servers(KAFKA_SASL_PORT)),
            "username": "ingest",
            "password": secrets.token_urlsafe(18) + SASL_PASSWORD_SUFFIX,
        }
        private_file(sasl_file, json.dumps(sasl))
    return sasl


def server_properties(node: int, data: Path) -> str:
    sasl = sasl_settings()
    jaas = (
        f"org.apache.kafka.common.security.plain.PlainLoginModule required "
        f"user_{sasl['username']}={jaas_quote(sasl['password'])};"
    )
    plain, controller, sasl_port = port(node), port(node, CONTROLLER_PORT), port(node, KAFKA_SASL_PORT)
    replicas, min_isr = (3, 2) if KAFKA_NODES >= 3 else (1, 1)
    return (
        "\n".join(
            [
                "process.roles=broker,controller",
                f"node.id={node}",
                "controller.quorum.voters=" + ",".join(f"{n}@127.0.0.1:{port(n, CONTROLLER_PORT)}" for n in nodes()),
                f"listeners=PLAINTEXT://127.0.0.1:{plain},CONTROLLER://127.0.0.1:{controller},"
                f"SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms=PLAIN",
                f"listener.name.sasl_plaintext.plain.sasl.jaas.config={properties_value(jaas)}",
                f"log.dirs={properties_value(str(data))}",
                "num.partitions=3",
                f"default.replication.factor={replicas}",
                f"min.insync.replicas={min_isr}",
                f"offsets.topic.replication.factor={replicas}",
                f"transaction.state.log.replication.factor={replicas}",
                f"transaction.state.log.min.isr={min_isr}",
                f"share.coordinator.state.topic.replication.factor={replicas}",
                f"share.coordinator.state.topic.min.isr={min_isr}",
                "group.initial.rebalance.delay.ms=0",
                "log.cleaner.backoff.ms=1000",  # compacted-topic tests need the cleaner to come round quickly
                "log.retention.check.interval.ms=5000",  # so do retention tests (topics of seconds or minutes)
                "auto.create.topics.enable=false",
            ]
        )
        + "\n"
    )


LOG4J = (
    "\n".join(
        [
            "rootLogger.level=INFO",
            "rootLogger.appenderRef.out.ref=out",
            "appender.out.type=Console",
            "appender.out.name=out",
            "appender.out.layout.type=PatternLayout",
            "appender.out.layout.pattern=[%d] %p %m (%c)%n",
            "logger.kafka.name=kafka",
            "logger.kafka.level=WARN",
            "logger.apache.name=org.apache.kafka",
            "logger.apache.level=WARN",
        ]
    )
    + "\n"
)


def start(only: int | None = None) -> dict:
    """Start the brokers that are not running (or only that one); returns the client config once every broker
    serves."""
    libs = INSTALLED / "kafka" / "libs"
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise SystemExit(f"[platform] no Kafka broker jars in {libs}; run `make install`")
    cluster_id = next(filter(None, (_cluster_id(node_dir(n) / "data") for n in nodes())), None)
    for node in [only] if only else nodes():
        start_node(node, libs, cluster_id)
        cluster_id = cluster_id or _cluster_id(node_dir(node) / "data")
    config = {"bootstrap_servers": bootstrap_servers()}
    wait_for(f"Kafka ({KAFKA_NODES} broker(s))", lambda: len(brokers(config)) == KAFKA_NODES, 180, log_file(1))
    return config


def start_node(node: int, libs: Path, cluster_id: str | None) -> None:
    """Start one broker; a new one's storage is formatted first, with the cluster id of the others."""
    root = node_dir(node)
    data = root / "data"
    props = root / "server.properties"
    private_file(props, server_properties(node, data))  # it holds the SASL password
    log4j = root / "log4j2.properties"
    log4j.write_text(LOG4J)
    java = [
        shutil.which("java") or "java",
        "-Xms256m",
        "-Xmx768m",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        f"{libs}/*",
    ]
    if not (data / "meta.properties").exists():
        cluster_id = cluster_id or base64.urlsafe_b64encode(secrets.token_bytes(16)).decode().rstrip("=")
        say(f"formatting KRaft storage {data} (cluster {cluster_id})")
        # "--cluster-id=<id>": an id starting with "-" (1 in 64 of them) would otherwise read as an option
        subprocess.run(
            [*java, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}", "-c", str(props)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    spawn(name(node), [*java, "kafka.Kafka", str(props)], log_file(node), dict(os.environ))


def _cluster_id(data: Path) -> str | None:
    meta = data / "meta.properties"
    if not meta.exists():
        return None
    return next(
        (line.split("=", 1)[1].strip() for line in meta.read_text().splitlines() if line.startswith("cluster.id=")),
        None,
    )


def brokers(config: dict) -> list[int]:
    """The ids of the brokers the cluster's metadata names."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**config, bootstrap_timeout_ms=3000, request_timeout_ms=5000)
    try:
        return [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
    finally:
        admin.close()


def stop_broker(only: int | None = None) -> None:
    # All nodes at once: stopped one after another, the last one has lost its controller quorum, cannot finish its
    # controlled shutdown and is killed when its grace ends.
    targets = [only] if only else nodes()
    with ThreadPoolExecutor(len(targets)) as pool:
        list(pool.map(lambda node: stop(name(node)), targets))
