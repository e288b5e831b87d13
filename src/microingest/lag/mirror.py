"""Mirror the ledger's positions to a Kafka consumer group named after the pipeline (`microingest-<pipeline>`).

So that Kafka's own tools (`kafka-consumer-groups.sh --describe`), Burrow and kafka-lag-exporter see the platform's
lag like any consumer's. Best effort and off the commit path: positions are handed to a background thread after a
batch has committed in Postgres; a slow or unreachable broker delays nothing and fails nothing (a warning is
logged), and the next commit mirrors again. The ledger stays the only authority: nothing ever reads the group back.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from microingest.batches import PartitionId

log = logging.getLogger(__name__)

METADATA = "mirrored from the microingest ledger"


def group_id(pipeline: str) -> str:
    return f"microingest-{pipeline}"


class GroupMirror:
    def __init__(self, kafka_config: dict[str, Any], pipeline: str, timeout_ms: int = 5000):
        self.config, self.group, self.timeout_ms = kafka_config, group_id(pipeline), timeout_ms
        self._pending: dict[PartitionId, int] = {}
        self._wake = threading.Condition()
        self._closing = False
        self._consumer: Any = None  # a KafkaConsumer, made on the first commit
        self._thread = threading.Thread(target=self._loop, name=f"group-mirror-{pipeline}", daemon=True)
        self._thread.start()

    def publish(self, positions: dict[PartitionId, int]) -> None:
        """Queue the committed positions (next offset to read, per topic and partition); returns at once."""
        with self._wake:
            for key, offset in positions.items():
                self._pending[key] = max(offset, self._pending.get(key, offset))
            self._wake.notify()

    def close(self, timeout: float = 3.0) -> None:
        """Mirror what is queued, waiting at most `timeout` seconds, then stop."""
        with self._wake:
            self._closing = True
            self._wake.notify()
        self._thread.join(timeout)
        if self._thread.is_alive():
            log.warning(
                "consumer group %s: mirroring still pending after %.0fs; left to the next commit", self.group, timeout
            )

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._closing:
                    self._wake.wait()
                positions, self._pending = self._pending, {}
                closing = self._closing
            if positions:
                self._commit(positions)
            if closing and not self._pending:
                break
        if self._consumer is not None:
            self._consumer.close(autocommit=False)

    def _commit(self, positions: dict[PartitionId, int]) -> None:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata

        try:
            if self._consumer is None:
                self._consumer = KafkaConsumer(
                    **self.config,
                    group_id=self.group,
                    enable_auto_commit=False,
                    bootstrap_timeout_ms=self.timeout_ms,
                    request_timeout_ms=self.timeout_ms + 1000,
                )
            self._consumer.commit(
                {TopicPartition(t, p): OffsetAndMetadata(o, METADATA, -1) for (t, p), o in positions.items()},
                timeout_ms=self.timeout_ms,
            )
            log.info(
                "consumer group %s: mirrored %s",
                self.group,
                ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(positions.items())),
            )
        except Exception as exc:  # best effort by design: the Postgres commit already happened and stands
            log.warning(
                "consumer group %s: could not mirror the ledger positions (%s); the next commit will", self.group, exc
            )
