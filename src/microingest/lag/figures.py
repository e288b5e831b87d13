"""Lag figures per partition: offset lag (last stable offset − ledger position) and time lag (age of the oldest record
not yet ingested).

Time lag comes from the record at the ledger position (its Kafka timestamp). When that record cannot be fetched, it
is interpolated from recorded (log end, time) observations, as kafka-lag-exporter does: the record at offset x was
written after the last moment the log still ended at or below x, and no later than the first moment it ended above.
A partition with no offset lag has no time lag, however long ago its producer last wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from microingest.batches import PartitionId, Sources
from microingest.declare.pipeline import Pipeline
from microingest.lag.sources import pipeline_sources
from microingest.systems.kafka_access import KafkaAccessError, record_timestamps


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    next_offset: int | None  # None: not ingested yet
    latest: int  # last stable offset
    earliest: int
    time_lag: timedelta | None = None  # None: unknown (no record fetched, nothing to interpolate from)
    time_source: str = ""  # "record" | "interpolated" | "" (no lag, or unknown)

    @property
    def position(self) -> int:
        """Where reading goes on: the ledger, or the earliest retained offset for a partition not read yet."""
        return self.earliest if self.next_offset is None else self.next_offset

    @property
    def lag(self) -> int:
        return max(self.latest - self.position, 0)

    @property
    def key(self) -> PartitionId:
        return self.topic, self.partition


def interpolated_time(offset: int, points: Sequence[tuple[datetime, int]]) -> datetime | None:
    """When the record at `offset` was written, from (observed at, log end) points; None when the points do not
    reach that far (no observation yet saw the log end above `offset`)."""
    last_at_or_below: dict[int, datetime] = {}  # log end -> last time it was seen
    first_seen: dict[int, datetime] = {}  # log end -> first time it was seen
    for at, end in sorted(points):
        first_seen.setdefault(end, at)
        last_at_or_below[end] = at
    above = sorted(e for e in first_seen if e > offset)
    if not above:
        return None
    upper_end = above[0]
    upper_at = first_seen[upper_end]
    below = [e for e in last_at_or_below if e <= offset]
    if not below:
        return upper_at  # written no later than this; older is possible, so the lag shown is a lower bound
    lower_end = max(below)
    lower_at = min(last_at_or_below[lower_end], upper_at)
    fraction = (offset - lower_end + 1) / (upper_end - lower_end)
    return lower_at + (upper_at - lower_at) * fraction


def time_lag(
    position: int, latest: int, now: datetime, record_ms: int | None, points: Sequence[tuple[datetime, int]] = ()
) -> tuple[timedelta | None, str]:
    """(time lag, where it came from) of a partition at `position` whose last stable offset is `latest`."""
    if position >= latest:
        return timedelta(0), ""
    if record_ms is not None and record_ms >= 0:
        written = datetime.fromtimestamp(record_ms / 1000, timezone.utc)
        return max(now - written, timedelta(0)), "record"
    estimated = interpolated_time(position, points)
    if estimated is None:
        return None, ""
    return max(now - estimated, timedelta(0)), "interpolated"


def partition_lags(
    pipeline: Pipeline,
    systems,
    now: datetime | None = None,
    points: Mapping[PartitionId, list[tuple[datetime, int]]] | None = None,
    fetch_records: bool = True,
    sources: Sources | None = None,
) -> list[PartitionLag]:
    """Offset and time lag of every partition of every topic the pipeline reads: the ledger against Kafka (one
    ListOffsets round trip and one query, unless `sources` were read already), plus one fetch per topic for the
    timestamps of the oldest waiting records unless `fetch_records` is off; `points` (observations per partition)
    fill in where no record was fetched."""
    now = now or datetime.now(timezone.utc)
    sources = sources or pipeline_sources(pipeline, systems)
    out = []
    for topic in sources.topics:
        ledger, earliest, latest = sources.positions[topic]
        base = [PartitionLag(topic, p, ledger.get(p), latest[p], earliest[p]) for p in sorted(latest)]
        waiting = {lag.partition: lag.position for lag in base if lag.lag}
        stamps: dict[int, int] = {}
        if waiting and fetch_records:
            try:
                stamps = record_timestamps(systems.kafka_client, topic, waiting)
            except KafkaAccessError:
                stamps = {}  # the offsets were just read; interpolation still gives a figure
        for lag in base:
            age, source = time_lag(
                lag.position, lag.latest, now, stamps.get(lag.partition), (points or {}).get(lag.key, ())
            )
            out.append(PartitionLag(topic, lag.partition, lag.next_offset, lag.latest, lag.earliest, age, source))
    return out
