"""The stack's data services as built from docker-compose.yml: Kafka takes only SCRAM users over TLS, and the ledger's
database, Kafka's log and the registry's schemas outlive `compose down` and `up` (named volumes)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from helpers.compose_stack import REGISTRY

BOOTSTRAP = ["127.0.0.1:19092", "127.0.0.1:19093", "127.0.0.1:19094"]
RECORDS = 300
TOPIC = f"compose-{uuid.uuid4().hex[:8]}"
SUBJECT = f"{TOPIC}-value"
SCHEMA = {"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}]}


def kafka_config(stack, tmp_path_factory, password=None) -> dict:
    ca = tmp_path_factory.getbasetemp() / "kafka-ca.pem"
    ca.write_bytes(stack.volume_file("kafka-ca", "ca.pem"))
    return {
        "bootstrap_servers": BOOTSTRAP,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "ingest",
        "sasl_plain_password": password or stack.env["MICROINGEST_KAFKA_PASSWORD"],
        "ssl_cafile": str(ca),
    }


def read_all(config: dict) -> list[tuple[int, int, bytes]]:
    consumer = KafkaConsumer(**config, enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        partitions = [TopicPartition(TOPIC, p) for p in consumer.partitions_for_topic(TOPIC)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        end = consumer.end_offsets(partitions)
        records = []
        while any(consumer.position(tp) < end[tp] for tp in partitions):
            for batch in consumer.poll(timeout_ms=2000).values():
                records += [(r.partition, r.offset, r.value) for r in batch]
        return sorted(records)
    finally:
        consumer.close()


def registry(method: str, path: str, body: dict | None = None) -> dict:
    request = urllib.request.Request(
        REGISTRY + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def written(stack, tmp_path_factory):
    """What the test writes into each data service before the stack goes down."""
    assert (
        subprocess.run(
            ["podman", "wait", stack.container("kafka-users")], capture_output=True, text=True
        ).stdout.strip()
        == "0"
    ), stack.logs("kafka-users")
    config = kafka_config(stack, tmp_path_factory)
    admin = KafkaAdminClient(**config)
    admin.create_topics([NewTopic(TOPIC, num_partitions=3, replication_factor=3)])
    admin.close()
    producer = KafkaProducer(**config, acks="all")
    for i in range(RECORDS):
        producer.send(TOPIC, json.dumps({"id": i}).encode(), partition=i % 3)
    producer.flush()
    producer.close()
    with stack.postgres() as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE compose_ledger (topic text, partition int, next_offset bigint)")
        cur.executemany("INSERT INTO compose_ledger VALUES (%s, %s, %s)", [(TOPIC, p, 100) for p in range(3)])
    schema_id = registry("POST", f"/subjects/{SUBJECT}/versions", {"schema": json.dumps(SCHEMA)})["id"]
    return {"records": read_all(config), "schema_id": schema_id, "config": config}


def test_clients_get_in_only_with_the_scram_password_over_tls(stack, written, tmp_path_factory):
    assert len(written["records"]) == RECORDS
    assert sorted(json.loads(v)["id"] for _, _, v in written["records"]) == list(range(RECORDS))
    with pytest.raises(KafkaError):
        KafkaConsumer(**kafka_config(stack, tmp_path_factory, password="not-the-password"), request_timeout_ms=10_000)
    with pytest.raises(KafkaError):  # the TLS listener does not speak plaintext
        KafkaConsumer(bootstrap_servers=BOOTSTRAP, request_timeout_ms=10_000, api_version_auto_timeout_ms=10_000)


def test_down_and_up_keep_the_ledger_the_log_and_the_schemas(stack, written):
    stack.restart()
    assert read_all(written["config"]) == written["records"]
    with stack.postgres() as conn, conn.cursor() as cur:
        cur.execute("SELECT topic, partition, next_offset FROM compose_ledger ORDER BY partition")
        assert cur.fetchall() == [(TOPIC, p, 100) for p in range(3)]
    assert registry("GET", f"/subjects/{SUBJECT}/versions/latest")["id"] == written["schema_id"]
    assert json.loads(registry("GET", f"/schemas/ids/{written['schema_id']}")["schema"]) == SCHEMA
