"""How long before Kafka's retention deletes records a pipeline has not read yet (pure arithmetic; the figures come
from `lag.status`).

Per partition with records waiting, the horizon is the sooner of:
- by time (retention.ms): the oldest unread record goes once it is retention.ms old; Kafka deletes whole segments,
  so this is the soonest it can go, and the horizon is retention.ms minus the partition's time lag;
- by size (retention.bytes): the oldest unread record goes once the bytes from it to the log's end pass
  retention.bytes. Those bytes are estimated from the partition's size and its record count (the average record),
  and the time until they pass from the log end's growth over the recorded observations.

A partition is AT_RISK when its horizon is shorter than the declared `lag.retention_margin`: time enough to act (a
larger run, more executors, a skip) before `on_retention_gap` has to record a loss.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from microingest.lag.figures import PartitionLag
from microingest.systems.kafka_retention import RetentionLimits


@dataclass(frozen=True)
class Horizon:
    """What retention leaves a partition's unread records; all None when nothing waits or nothing limits."""

    seconds: float | None = None  # until the oldest unread record may be deleted (0: any moment now)
    bytes_left: int | None = None  # how much the partition may still grow before retention.bytes deletes it
    cause: str = ""  # "retention.ms" | "retention.bytes": which limit comes first

    def at_risk(self, margin_seconds: int | None) -> bool:
        return margin_seconds is not None and self.seconds is not None and self.seconds < margin_seconds


def growth_per_second(points: Sequence[tuple[datetime, int]]) -> float | None:
    """Offsets a partition's log grows by per second, from (observed at, log end) points; None without two points
    apart in time."""
    if len(points) < 2:
        return None
    (first_at, first_end), (last_at, last_end) = min(points), max(points)
    seconds = (last_at - first_at).total_seconds()
    return None if seconds <= 0 else max(last_end - first_end, 0) / seconds


def horizon(lag: PartitionLag, limits: RetentionLimits, size_bytes: int | None, growth: float | None) -> Horizon:
    if not lag.lag:
        return Horizon()
    found: list[tuple[float, str]] = []
    if limits.ms is not None and lag.time_lag is not None:
        found.append((max(limits.ms / 1000 - lag.time_lag.total_seconds(), 0.0), "retention.ms"))
    bytes_left = None
    if limits.bytes is not None and size_bytes is not None and lag.latest > lag.earliest:
        per_record = size_bytes / (lag.latest - lag.earliest)
        bytes_left = int(limits.bytes - per_record * lag.lag)
        if bytes_left <= 0:
            found.append((0.0, "retention.bytes"))
        elif growth:
            found.append((bytes_left / (per_record * growth), "retention.bytes"))
    if not found:
        return Horizon(bytes_left=bytes_left)
    seconds, cause = min(found)
    return Horizon(seconds, bytes_left, cause)
