"""Kafka access through kafka-python: partition bounds for planning, topic admin and producing (demo, tests).

Bounds are read with isolation_level=read_committed, so 'latest' is the last stable offset: a batch never plans
past records of a transaction that may still abort.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from kafka import IsolationLevel, KafkaAdminClient, KafkaConsumer, KafkaProducer, OffsetSpec, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError, UnknownTopicOrPartitionError, for_code

from microingest.errors import Transient

log = logging.getLogger(__name__)


class KafkaAccessError(Transient):
    pass


def _unreachable(config: dict[str, Any], exc: Exception) -> KafkaAccessError:
    return KafkaAccessError(f"Kafka at {','.join(config['bootstrap_servers'])} is unreachable: {exc!r}")


@contextmanager
def _reader(config: dict[str, Any], timeout_ms: int) -> Iterator[KafkaConsumer]:
    """A read_committed consumer for offset look-ups (no group, nothing committed)."""
    try:
        consumer = KafkaConsumer(
            **config,
            isolation_level="read_committed",
            enable_auto_commit=False,
            request_timeout_ms=max(timeout_ms, 5000) + 1000,
            bootstrap_timeout_ms=timeout_ms,
        )
    except (KafkaError, OSError) as exc:
        raise _unreachable(config, exc) from exc
    try:
        yield consumer
    finally:
        consumer.close()


@contextmanager
def admin_client(config: dict[str, Any], timeout_ms: int = 15000) -> Iterator[KafkaAdminClient]:
    try:
        admin = KafkaAdminClient(
            **config, bootstrap_timeout_ms=timeout_ms, request_timeout_ms=max(timeout_ms, 5000) + 1000
        )
    except (KafkaError, OSError) as exc:
        raise _unreachable(config, exc) from exc
    try:
        yield admin
    finally:
        admin.close()


Bounds = tuple[dict[int, int], dict[int, int]]  # (earliest, latest) offset per partition of a topic


class TopicsState(NamedTuple):
    bounds: dict[str, Bounds]
    ids: dict[str, str]  # the id Kafka gave each topic when it was created; none from a broker too old to have them


_NO_TOPIC_ID = "00000000-0000-0000-0000-000000000000"


def partition_bounds(config: dict[str, Any], topic: str, timeout_ms: int = 15000) -> Bounds:
    """(earliest, latest) offset per partition of `topic`."""
    return topics_state(config, [topic], timeout_ms).bounds[topic]


def topics_state(config: dict[str, Any], topics: Iterable[str], timeout_ms: int = 15000) -> TopicsState:
    """(earliest, latest) offset per partition of each topic, and each topic's id: one client, one metadata round
    trip and a ListOffsets round trip per end (a planning's look-up, on the path of every run's start)."""
    topics = sorted(set(topics))
    if not topics:
        return TopicsState({}, {})
    with admin_client(config, timeout_ms) as admin:
        try:
            described = admin.describe_topics(topics)
            tps = [TopicPartition(d["name"], p) for d in described for p in _described_partitions(d)]
            ends = [
                admin.list_partition_offsets({tp: spec for tp in tps}, IsolationLevel.READ_COMMITTED, timeout_ms)
                for spec in (OffsetSpec.EARLIEST, OffsetSpec.LATEST)
            ]
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read offsets of topics {', '.join(topics)}: {exc!r}") from exc
    bounds: dict[str, Bounds] = {t: ({}, {}) for t in topics}
    for end, found in enumerate(ends):
        for tp, at in found.items():
            bounds[tp.topic][end][tp.partition] = at.offset
    ids = {d["name"]: str(d["topic_id"]) for d in described if d.get("topic_id") is not None}
    return TopicsState(bounds, {t: i for t, i in ids.items() if i != _NO_TOPIC_ID})


def _described_partitions(described: dict[str, Any]) -> list[int]:
    topic, error = described["name"], described.get("error_code", 0)
    if error == UnknownTopicOrPartitionError.errno:
        raise KafkaAccessError(f"topic '{topic}' does not exist on the cluster")
    if error:
        raise KafkaAccessError(f"could not describe topic '{topic}': {for_code(error).__name__}")
    if not described["partitions"]:
        raise KafkaAccessError(f"topic '{topic}' has no partitions in the cluster metadata")
    return sorted(p["partition_index"] for p in described["partitions"])


def list_topics(config: dict[str, Any], timeout_ms: int = 15000) -> set[str]:
    """The names of the cluster's topics (the internal ones, such as __consumer_offsets, left out)."""
    with admin_client(config, timeout_ms) as admin:
        try:
            return {t for t in admin.list_topics() if not t.startswith("__")}
        except KafkaError as exc:
            raise KafkaAccessError(f"could not list the cluster's topics: {exc!r}") from exc


def offsets_at(config: dict[str, Any], topic: str, timestamp_ms: int, timeout_ms: int = 15000) -> dict[int, int | None]:
    """Per partition, the first offset whose record timestamp is >= timestamp_ms (Kafka's offsets-for-times look-up,
    answered from each partition's time index); None where no record is that recent."""
    with _reader(config, timeout_ms) as consumer:
        try:
            tps = [TopicPartition(topic, p) for p in _partitions(consumer, topic)]
            found = consumer.offsets_for_times({tp: timestamp_ms for tp in tps}, timeout_ms=timeout_ms)
        except KafkaError as exc:
            raise KafkaAccessError(f"could not look up offsets by time on topic '{topic}': {exc!r}") from exc
    return {tp.partition: (None if hit is None else hit.offset) for tp, hit in found.items()}


def record_timestamps(
    config: dict[str, Any], topic: str, positions: dict[int, int], timeout_ms: int = 5000
) -> dict[int, int]:
    """Per partition, the Kafka timestamp (epoch ms) of the first committed record at or after its position.

    One consumer assigned to all the partitions at once, polled until each has answered or the time is up;
    partitions without an answer (nothing there yet, or too slow) are left out."""
    if not positions:
        return {}
    found: dict[int, int] = {}
    with _reader(config, timeout_ms) as consumer:
        tps = {p: TopicPartition(topic, p) for p in positions}
        try:
            consumer.assign(list(tps.values()))
            for p, tp in tps.items():
                consumer.seek(tp, positions[p])
            deadline = time.monotonic() + timeout_ms / 1000
            while len(found) < len(tps) and time.monotonic() < deadline:
                for tp, records in consumer.poll(timeout_ms=200, max_records=500).items():
                    if tp.partition not in found and records:
                        found[tp.partition] = records[0].timestamp
                        consumer.pause(tp)
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read records of topic '{topic}': {exc!r}") from exc
    return found


class KafkaRecord(NamedTuple):
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def record_at(config: dict[str, Any], topic: str, partition: int, offset: int, timeout_ms: int = 5000):
    """The committed record at exactly `offset`, or None: deleted, never there (a transaction marker, an aborted or
    compacted record), or not read within the time."""
    with _reader(config, timeout_ms) as consumer:
        tp = TopicPartition(topic, partition)
        try:
            consumer.assign([tp])
            consumer.seek(tp, offset)
            deadline = time.monotonic() + timeout_ms / 1000
            while time.monotonic() < deadline:
                for record in consumer.poll(timeout_ms=200, max_records=1).get(tp, []):
                    if record.offset != offset:
                        return None
                    return KafkaRecord(record.offset, record.timestamp, record.key, record.value, list(record.headers))
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read {topic}[{partition}]@{offset}: {exc!r}") from exc
    return None


def group_offsets(config: dict[str, Any], group: str, topic: str) -> dict[int, int]:
    """The offsets consumer group `group` has committed on `topic`, per partition (none: the group never did)."""
    with admin_client(config) as admin:
        try:
            found = admin.list_group_offsets({group: None}).get(group, {})
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read the offsets of consumer group '{group}': {exc!r}") from exc
    return {tp.partition: meta.offset for tp, meta in found.items() if tp.topic == topic and meta.offset >= 0}


def _partitions(consumer: KafkaConsumer, topic: str) -> list[int]:
    # Metadata may need a refresh round trip before a topic is known; partitions_for_topic alone can say None.
    if topic not in consumer.topics():
        raise KafkaAccessError(f"topic '{topic}' does not exist on the cluster")
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise KafkaAccessError(f"topic '{topic}' has no partitions in the cluster metadata")
    return sorted(partitions)


def create_topic(config: dict[str, Any], topic: str, partitions: int, replication: int = -1) -> bool:
    """Create the topic, replicated as the cluster's default.replication.factor says unless `replication` is given;
    returns False when it already existed."""
    with admin_client(config) as admin:
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication)])
            return True
        except TopicAlreadyExistsError:
            return False


def delete_topic(config: dict[str, Any], topic: str) -> None:
    with admin_client(config) as admin:
        admin.delete_topics([topic])


def produce(
    config: dict[str, Any], topic: str, records: Iterable[tuple], partition_of=None, timestamp_of=None
) -> list[tuple[int, int]]:
    """Send (key, value) or (key, value, headers) records, wait for every acknowledgement; returns each record's
    (partition, offset). `partition_of(i, key)` and `timestamp_of(i)` (epoch ms) override the producer's choice."""
    try:
        producer = KafkaProducer(
            **config, acks="all", linger_ms=20, enable_idempotence=True, bootstrap_timeout_ms=15000
        )
    except (KafkaError, OSError) as exc:
        raise _unreachable(config, exc) from exc
    try:
        futures = [
            producer.send(
                topic,
                key=r[0],
                value=r[1],
                headers=r[2] if len(r) > 2 else None,
                partition=partition_of(i, r[0]) if partition_of else None,
                timestamp_ms=timestamp_of(i) if timestamp_of else None,
            )
            for i, r in enumerate(records)
        ]
        producer.flush()
        metadata = [f.get(timeout=30) for f in futures]
    finally:
        producer.close()
    return [(m.partition, m.offset) for m in metadata]


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
