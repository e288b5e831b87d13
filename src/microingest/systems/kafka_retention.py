"""What Kafka's retention will delete, as the broker holds it: a topic's retention.ms and retention.bytes (the
topic's own or the broker's default) and each partition's size on disk (the largest replica's)."""

from __future__ import annotations

from typing import Any, NamedTuple

from kafka.admin import ConfigResource
from kafka.errors import KafkaError

from microingest.systems.kafka_access import KafkaAccessError, admin_client


class RetentionLimits(NamedTuple):
    """None: no limit of that kind (Kafka's -1), or a topic that only compacts."""

    ms: int | None
    bytes: int | None


def retention_limits(config: dict[str, Any], topic: str) -> RetentionLimits:
    wanted = {"retention.ms": None, "retention.bytes": None, "cleanup.policy": None}
    with admin_client(config) as admin:
        try:
            described = admin.describe_configs([ConfigResource("TOPIC", topic, wanted)], config_filter="all")
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read the retention of topic '{topic}': {exc!r}") from exc
    values = {k: v.get("value") for k, v in described["topic"][topic].items()}
    if "delete" not in (values.get("cleanup.policy") or "delete"):
        return RetentionLimits(None, None)
    return RetentionLimits(*(_limit(values.get(key)) for key in ("retention.ms", "retention.bytes")))


def _limit(value: str | None) -> int | None:
    number = None if value is None else int(value)
    return number if number is not None and number >= 0 else None


def partition_sizes(config: dict[str, Any], topic: str) -> dict[int, int]:
    """Bytes on disk per partition of `topic` (over replicas and log dirs, the largest)."""
    with admin_client(config) as admin:
        try:
            brokers = admin.describe_log_dirs([topic])
        except KafkaError as exc:
            raise KafkaAccessError(f"could not read the size of topic '{topic}': {exc!r}") from exc
    sizes: dict[int, int] = {}
    for broker in brokers:
        for log_dir in broker["log_dirs"]:
            for found in log_dir["topics"]:
                if found["name"] != topic:
                    continue
                for p in found["partitions"]:
                    sizes[p["partition_index"]] = max(sizes.get(p["partition_index"], 0), p["partition_size"])
    return sizes
