"""Range planning: which offsets the next batch reads. Pure logic, no I/O.

Inputs are the ledger (next offset to read per partition, as committed in Postgres) and the partition bounds Kafka
reports (earliest available, latest = end offset under read_committed). The output is a set of half-open ranges
[from, until) capped in total by the pipeline's max records per batch; each range remembers the ledger value it was
planned from so the commit can fence against a run that got there first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping


class PlanningError(RuntimeError):
    pass


class RetentionGapError(PlanningError):
    """The ledger points below the earliest offset Kafka still has: records were deleted before being ingested."""

    def __init__(self, topic: str, partition: int, next_offset: int, earliest: int):
        self.topic, self.partition, self.missing = topic, partition, (next_offset, earliest)
        super().__init__(
            f"retention gap on {topic}[{partition}]: the ledger's next offset is {next_offset} but the earliest "
            f"available offset is {earliest}; offsets [{next_offset}, {earliest}) were deleted before ingestion"
        )


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    # The ledger value this range was planned from; None means the partition had no ledger row yet.
    ledger_offset: int | None

    @property
    def size(self) -> int:
        return self.until_offset - self.from_offset

    @property
    def gap(self) -> tuple[int, int] | None:
        """[ledger, from) when the range skips offsets lost to retention, else None."""
        if self.ledger_offset is not None and self.ledger_offset < self.from_offset:
            return self.ledger_offset, self.from_offset
        return None

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "from": self.from_offset,
            "until": self.until_offset,
            "ledger": self.ledger_offset,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> "OffsetRange":
        ledger = d.get("ledger")
        return cls(str(d["topic"]), int(d["partition"]), int(d["from"]), int(d["until"]),
                   None if ledger is None else int(ledger))


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    # Partitions new to the ledger that start at 'latest': their position is recorded without reading anything.
    pins: tuple[OffsetRange, ...] = field(default=())

    @property
    def total_records(self) -> int:
        """Upper bound: transaction markers and compaction can make the real count lower."""
        return sum(r.size for r in self.ranges)


def plan_ranges(
    topic: str,
    ledger: Mapping[int, int],
    earliest: Mapping[int, int],
    latest: Mapping[int, int],
    max_records: int,
    start_from: str = "earliest",
    on_retention_gap: str = "fail",
) -> Plan:
    """Plan the next batch for one topic.

    Partitions are discovered from `latest` (every partition Kafka reports), so partitions added since the last
    run are picked up and start at `start_from`. The cap is shared fairly: partitions with little pending data get
    all of it, the rest split what is left evenly.

    A retention gap (ledger below the earliest offset) raises RetentionGapError, or with on_retention_gap="skip"
    starts at the earliest offset; the range then keeps the old ledger value, so [ledger, from) is the gap the
    commit records in the batch history.
    """
    if max_records < 1:
        raise PlanningError(f"max_records must be positive, got {max_records}")
    if start_from not in ("earliest", "latest"):
        raise PlanningError(f"start_from must be 'earliest' or 'latest', got {start_from!r}")
    missing = sorted(set(latest) ^ set(earliest))
    if missing:
        raise PlanningError(f"{topic}: partitions {missing} lack an earliest or latest offset")

    pending: list[tuple[int, int, int, int | None]] = []  # (available, partition, start, ledger)
    pins = []
    for partition in sorted(latest):
        low, high = earliest[partition], latest[partition]
        committed = ledger.get(partition)
        if committed is None:
            if start_from == "latest":
                pins.append(OffsetRange(topic, partition, high, high, None))
                continue
            start = low
        else:
            if committed > high:
                raise PlanningError(
                    f"{topic}[{partition}]: the ledger's next offset {committed} is beyond the latest offset {high}; "
                    "was the topic deleted and recreated?"
                )
            if committed >= low:
                start = committed
            elif on_retention_gap == "skip":
                start = low
            else:
                raise RetentionGapError(topic, partition, committed, low)
        if high > start:
            pending.append((high - start, partition, start, committed))

    ranges = []
    budget = max_records
    for i, (available, partition, start, committed) in enumerate(sorted(pending)):
        share = math.ceil(budget / (len(pending) - i))
        take = min(available, share)
        budget -= take
        if take:
            ranges.append(OffsetRange(topic, partition, start, start + take, committed))
    ranges.sort(key=lambda r: r.partition)
    return Plan(tuple(ranges), tuple(pins))
