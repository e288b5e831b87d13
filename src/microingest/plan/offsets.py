"""Range planning: which offsets a run reads, and how it splits them into batches. Pure logic, no I/O.

Inputs are the ledger (next offset to read per partition, as committed in Postgres) and the partition bounds Kafka
reports (earliest available, latest = end offset under read_committed). `plan_ranges` turns them into half-open
ranges [from, until) capped in total; each range remembers the ledger value it was planned from so the commit can
fence against a run that got there first. A `RunPlan` holds a whole run's ranges and hands them out batch by batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from microingest.batches import OffsetRange, Positions, fair_shares
from microingest.errors import PlanningError


class RequestError(PlanningError):
    """A run's parameters ask for something Kafka or the ledger cannot give; `field` names the parameter."""

    def __init__(self, field: str, problem: str):
        self.field, self.problem = field, problem
        super().__init__(f"param {field}: {problem}")


class RetentionGapError(PlanningError):
    """The ledger points below the earliest offset Kafka still has: records were deleted before being ingested."""

    def __init__(self, topic: str, partition: int, next_offset: int, earliest: int):
        self.topic, self.partition, self.missing = topic, partition, (next_offset, earliest)
        super().__init__(
            f"retention gap on {topic}[{partition}]: the ledger's next offset is {next_offset} but the earliest "
            f"available offset is {earliest}; offsets [{next_offset}, {earliest}) were deleted before ingestion"
        )


class TopicRecreatedError(PlanningError):
    """The topic the ledger's positions belong to was deleted and created again under its name (a new Kafka topic
    id): its offsets start over, so reading on from those positions would silently leave records out."""

    def __init__(self, pipeline: str, topic: str, old_id: str, new_id: str, positions: Mapping[int, int]):
        self.topic, self.old_id, self.new_id = topic, old_id, new_id
        at = ", ".join(f"[{p}] {o}" for p, o in sorted(positions.items()))
        super().__init__(
            f"topic {topic} was deleted and created again since pipeline '{pipeline}' last committed (Kafka topic id "
            f"{old_id}, now {new_id}): the live positions ({at}) belong to the old topic, whose records past them "
            "went with it, and the new topic's offsets start over. Nothing was read. To read the new topic from "
            "start_from, set on_topic_recreated: restart in the declaration (the restart is recorded in the batch "
            "history); a target keyed on the source position, and the dead letters, still hold the old topic's "
            "positions, which the new topic's offsets repeat: move those rows aside first"
        )


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    # Positions recorded without reading anything: partitions new to the ledger that start at 'latest', and those whose
    # every record past the ledger retention deleted (on_retention_gap: skip; the range keeps the gap).
    pins: tuple[OffsetRange, ...] = field(default=())

    @property
    def total_records(self) -> int:
        """Upper bound: transaction markers and compaction can make the real count lower."""
        return sum(r.size for r in self.ranges)


def plan_ranges(
    positions: Mapping[str, Positions],
    max_records: int,
    start_from: str = "earliest",
    on_retention_gap: str = "fail",
    joined_from: str | None = None,
) -> Plan:
    """Plan the next ranges over the pipeline's topics, each with its positions.

    Partitions are discovered from `latest` (every partition Kafka reports). `start_from` says where the partitions
    of a topic the pipeline starts begin: `latest` pins them at their end without reading. `joined_from`, when given,
    says it instead for every topic without positions (the caller gives it once the pipeline holds positions on
    others: a topic that came to match a pattern holds nothing older than the pipeline, so it is read from
    'earliest'). A partition added to a topic after the pipeline started on it (the ledger knows others of the
    topic) holds nothing older than the pipeline, so it is read from its earliest offset whatever `start_from` says
    (as Flink's Kafka source does): pinning it at the end the plan first sees would drop what producers wrote to it
    in between. The cap is shared fairly over every partition of every topic: partitions with little pending data
    get all of it, the rest split what is left evenly.

    A retention gap (ledger below the earliest offset) raises RetentionGapError, or with on_retention_gap="skip"
    starts at the earliest offset; the range then keeps the old ledger value, so [ledger, from) is the gap the
    commit records in the batch history. A gap with nothing left after it is a pin at the earliest offset that keeps
    the old ledger value: its commit moves the position past the gap and records it, without reading.
    """
    if max_records < 1:
        raise PlanningError(f"max_records must be positive, got {max_records}")
    if start_from not in ("earliest", "latest"):
        raise PlanningError(f"start_from must be 'earliest' or 'latest', got {start_from!r}")
    pending: list[tuple[int, str, int, int, int | None]] = []  # (available, topic, partition, start, ledger)
    pins: list[OffsetRange] = []
    for topic in sorted(positions):
        begins = start_from if joined_from is None or positions[topic].ledger else joined_from
        _topic_pending(topic, positions[topic], begins, on_retention_gap, pending, pins)

    pending.sort()
    takes = fair_shares([p[0] for p in pending], max_records)
    ranges = [
        OffsetRange(topic, partition, start, start + take, committed)
        for (_, topic, partition, start, committed), take in zip(pending, takes)
        if take
    ]
    ranges.sort(key=lambda r: (r.topic, r.partition))
    return Plan(tuple(ranges), tuple(pins))


def _topic_pending(
    topic: str,
    positions: Positions,
    start_from: str,
    on_retention_gap: str,
    pending: list[tuple[int, str, int, int, int | None]],
    pins: list[OffsetRange],
) -> None:
    """What waits on one topic's partitions (added to `pending`), and the positions to record without reading."""
    ledger, earliest, latest = positions
    missing = sorted(set(latest) ^ set(earliest))
    if missing:
        raise PlanningError(f"{topic}: partitions {missing} lack an earliest or latest offset")
    for partition in sorted(latest):
        low, high = earliest[partition], latest[partition]
        committed = ledger.get(partition)
        if committed is None:
            if start_from == "latest" and not ledger:
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
                if high == low:  # everything past the position was deleted: no read, but the gap is recorded now
                    pins.append(OffsetRange(topic, partition, low, low, committed))
                    continue
            else:
                raise RetentionGapError(topic, partition, committed, low)
        if high > start:
            pending.append((high - start, topic, partition, start, committed))


def backfill_ranges(
    topic: str, requested: Mapping[int, tuple[int, int]], positions: Positions, field: str, clip_to_live: bool = False
) -> tuple[tuple[OffsetRange, ...], list[str]]:
    """Check requested backfill ranges [from, until) per partition against Kafka and the ledger.

    Everything at and above a partition's live position (its ledger offset) is the live pipeline's to take. Ranges
    given by offsets must lie below it, or the request fails naming the field and partition; with clip_to_live (a
    time window, whose end the operator did not pick by offset) they are cut at it, and partitions the live
    pipeline has not started are left to it. Returns the ranges and notes on what was cut."""
    ledger, earliest, latest = positions
    ranges, notes = [], []
    known = ", ".join(map(str, sorted(latest)))
    for partition in sorted(requested):
        lo, hi = requested[partition]
        where = f"{field}['{partition}']"
        if partition not in latest:
            raise RequestError(where, f"partition {partition} does not exist in topic {topic} (partitions: {known})")
        if lo > hi:
            raise RequestError(where, f"from {lo} is greater than until {hi}")
        if hi > latest[partition]:
            raise RequestError(
                where, f"until {hi} is beyond the log end of {topic}[{partition}] (latest offset {latest[partition]})"
            )
        if lo < earliest[partition] and lo < hi:
            raise RequestError(
                where,
                f"from {lo} is below the earliest offset {topic}[{partition}] still retains "
                f"({earliest[partition]}); those records are gone",
            )
        live = ledger.get(partition)
        if live is None:
            if clip_to_live:
                notes.append(f"{topic}[{partition}]: no live position yet; left to the live pipeline")
                continue
            raise RequestError(
                where,
                f"the live pipeline has not started {topic}[{partition}] yet, so it may still "
                "read these offsets itself; run the pipeline once (it records its position) "
                "and backfill below that position",
            )
        if hi > live:
            if not clip_to_live:
                raise RequestError(
                    where,
                    f"until {hi} is above the live position {live} of {topic}[{partition}]; "
                    f"offsets from {live} on are the live pipeline's to ingest",
                )
            notes.append(
                f"{topic}[{partition}]: [{max(lo, live)}, {hi}) is at or above the live position {live}; "
                "left to the live pipeline"
            )
            hi = max(min(hi, live), lo) if lo < live else lo
        if hi > lo:
            ranges.append(OffsetRange(topic, partition, lo, hi, None))
    return tuple(ranges), notes


def skip_range(topic: str, partition: int, until: int, positions: Positions, start_from: str) -> OffsetRange:
    """The range a skip of `partition` to `until` passes: from the live position to `until`.

    For a partition whose first batch never committed, the live position is where the pipeline would start: its
    earliest offset (start_from earliest, or a partition added after the pipeline started). Offsets retention already
    deleted are no record to keep: the range starts at the earliest offset still there and keeps the ledger value,
    so [ledger, earliest) goes into the history as any retention gap does."""
    ledger, earliest, latest = positions
    where = f"{topic}[{partition}]"
    if partition not in latest:
        raise RequestError(
            "partition",
            f"partition {partition} does not exist in topic {topic} "
            f"(partitions: {', '.join(map(str, sorted(latest)))})",
        )
    committed = ledger.get(partition)
    if committed is None and start_from != "earliest" and not ledger:
        raise RequestError(
            "partition",
            f"{where} has no live position yet: with start_from latest, the first "
            "run records it; run the pipeline once",
        )
    position = earliest[partition] if committed is None else committed
    if until <= position:
        raise RequestError("until", f"until {until} is not beyond the live position {position} of {where}")
    if until > latest[partition]:
        raise RequestError(
            "until", f"until {until} is beyond the log end of {where} (latest offset {latest[partition]})"
        )
    return OffsetRange(topic, partition, max(position, earliest[partition]), until, committed)
