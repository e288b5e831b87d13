"""Range planning: which offsets a run reads, and how it splits them into batches. Pure logic, no I/O.

Inputs are the ledger (next offset to read per partition, as committed in Postgres) and the partition bounds Kafka
reports (earliest available, latest = end offset under read_committed). `plan_ranges` turns them into half-open
ranges [from, until) capped in total; each range remembers the ledger value it was planned from so the commit can
fence against a run that got there first. A `RunPlan` holds a whole run's ranges and hands them out batch by batch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from microingest.errors import Refused


class PlanningError(Refused):
    pass


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
        self.old_id, self.new_id = old_id, new_id
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
class OffsetRange:
    topic: str
    partition: int
    from_offset: int
    until_offset: int
    # The ledger value this range was planned from; None means the partition had no ledger row yet.
    ledger_offset: int | None

    def __str__(self) -> str:
        # How messages and logs name a range everywhere, half-open as planned: "topic[partition] [from, until)".
        return f"{self.topic}[{self.partition}] [{self.from_offset}, {self.until_offset})"

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
    def from_dict(cls, d: Mapping) -> OffsetRange:
        ledger = d.get("ledger")
        return cls(
            str(d["topic"]),
            int(d["partition"]),
            int(d["from"]),
            int(d["until"]),
            None if ledger is None else int(ledger),
        )


@dataclass(frozen=True)
class Plan:
    ranges: tuple[OffsetRange, ...]
    # Partitions new to the ledger that start at 'latest': their position is recorded without reading anything.
    pins: tuple[OffsetRange, ...] = field(default=())

    @property
    def total_records(self) -> int:
        """Upper bound: transaction markers and compaction can make the real count lower."""
        return sum(r.size for r in self.ranges)


class Positions(NamedTuple):
    """Where a pipeline is and what Kafka holds, per partition: the ledger's next offset to read (no entry for a
    partition never read), the earliest offset Kafka retains, and the latest (the end under read_committed)."""

    ledger: Mapping[int, int]
    earliest: Mapping[int, int]
    latest: Mapping[int, int]


def plan_ranges(
    topic: str,
    positions: Positions,
    max_records: int,
    start_from: str = "earliest",
    on_retention_gap: str = "fail",
) -> Plan:
    """Plan the next batch for one topic.

    Partitions are discovered from `latest` (every partition Kafka reports). `start_from` says where the partitions
    a pipeline starts with begin: `latest` pins them at their end without reading. A partition added after the
    pipeline started (the ledger knows others of the topic) holds nothing older than the pipeline, so it is read
    from its earliest offset whatever `start_from` says (as Flink's Kafka source does): pinning it at the end the
    plan first sees would drop what producers wrote to it in between. The cap is shared fairly: partitions with
    little pending data get all of it, the rest split what is left evenly.

    A retention gap (ledger below the earliest offset) raises RetentionGapError, or with on_retention_gap="skip"
    starts at the earliest offset; the range then keeps the old ledger value, so [ledger, from) is the gap the
    commit records in the batch history.
    """
    ledger, earliest, latest = positions
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
            else:
                raise RetentionGapError(topic, partition, committed, low)
        if high > start:
            pending.append((high - start, partition, start, committed))

    pending.sort()
    takes = fair_shares([p[0] for p in pending], max_records)
    ranges = [
        OffsetRange(topic, partition, start, start + take, committed)
        for (_, partition, start, committed), take in zip(pending, takes)
        if take
    ]
    ranges.sort(key=lambda r: r.partition)
    return Plan(tuple(ranges), tuple(pins))


def fair_shares(available: Sequence[int], budget: int) -> list[int]:
    """How much of `budget` each claimant takes: small claims are met in full, the rest split what is left evenly.
    `available` must be sorted ascending."""
    takes = []
    for i, want in enumerate(available):
        take = min(want, math.ceil(budget / (len(available) - i)))
        budget -= take
        takes.append(take)
    return takes


# ingest: a live run; backfill: a replay below the live position; skip: an operator moving a stuck partition's live
# position forward, every record on the way kept as a dead letter.
RUN_KINDS = ("ingest", "backfill", "skip")


@dataclass(frozen=True)
class RunPlan:
    """What one DAG run ingests: ranges up to a bounded end, committed in batches of at most `batch_cap` records,
    each batch its own transaction.

    Live runs (kind ingest) and skips advance the ledger batch by batch, so every range after the first batch of a
    partition expects the ledger at its own start. Backfills (kind backfill) never touch the ledger; their ranges
    carry no ledger value. A live run stops starting batches once `time_budget_seconds` is spent; the next run goes
    on.
    """

    kind: str
    ranges: tuple[OffsetRange, ...]
    batch_cap: int
    time_budget_seconds: float | None = None
    overlap: str = "refuse"  # backfills: what to do about positions already in the target
    # Backfills by time: [from, until) in epoch ms. The ranges span the window's offsets, but producers' clocks are not
    # monotonic: only the records timestamped inside it are staged.
    time_window_ms: tuple[int, int] | None = None
    topic_id: str | None = None  # Kafka's id of the topic planned from: the commit refuses a topic made again since
    note: str | None = None  # skips: who skipped and why, kept with every skipped record and in the history

    def __post_init__(self):
        if self.kind not in RUN_KINDS:
            raise PlanningError(f"run kind must be one of {', '.join(RUN_KINDS)}, got {self.kind!r}")
        if self.batch_cap < 1:
            raise PlanningError(f"batch cap must be positive, got {self.batch_cap}")

    @property
    def total_records(self) -> int:
        return sum(r.size for r in self.ranges)

    @property
    def batches_needed(self) -> int:
        return math.ceil(self.total_records / self.batch_cap)

    def next_batch(self, number: int | None = None) -> tuple[Batch, RunPlan]:
        """The next batch (the cap shared fairly across partitions; `number` its place in the DAG run) and the plan
        of what is left."""
        ordered = sorted(self.ranges, key=lambda r: (r.size, r.partition))
        takes = fair_shares([r.size for r in ordered], self.batch_cap)
        batch, rest = [], []
        for r, take in zip(ordered, takes):
            if take:
                batch.append(replace(r, until_offset=r.from_offset + take))
            if take < r.size:
                rest.append(self._from(r, r.from_offset + take) if take else r)
        return (
            Batch(
                self.kind,
                tuple(sorted(batch, key=_position)),
                number,
                self.overlap,
                self.time_window_ms,
                self.topic_id,
                self.note,
            ),
            replace(self, ranges=tuple(sorted(rest, key=_position))),
        )

    def without(self, committed: Sequence[OffsetRange]) -> RunPlan:
        """This plan minus ranges that batches of the same run already committed (a retried or resumed run).

        A run commits each partition's range front to back, so what a run committed is a prefix of each range."""
        rest = []
        for r in self.ranges:
            done = sorted(
                (
                    c
                    for c in committed
                    if (c.topic, c.partition) == (r.topic, r.partition)
                    and c.from_offset < r.until_offset
                    and c.until_offset > r.from_offset
                ),
                key=lambda c: c.from_offset,
            )
            reached = r.from_offset
            for c in done:
                if c.from_offset > reached:
                    raise PlanningError(
                        f"{r.topic}[{r.partition}]: this run committed [{c.from_offset}, {c.until_offset}) but not "
                        f"[{reached}, {c.from_offset}) before it; the batch history is inconsistent"
                    )
                reached = max(reached, c.until_offset)
            if reached < r.until_offset:
                rest.append(r if reached == r.from_offset else self._from(r, reached))
        return replace(self, ranges=tuple(rest))

    def _from(self, r: OffsetRange, start: int) -> OffsetRange:
        return OffsetRange(r.topic, r.partition, start, r.until_offset, None if self.kind == "backfill" else start)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "ranges": [r.to_dict() for r in self.ranges],
            "batch_cap": self.batch_cap,
            "time_budget_seconds": self.time_budget_seconds,
            "overlap": self.overlap,
            "time_window_ms": None if self.time_window_ms is None else list(self.time_window_ms),
            "topic_id": self.topic_id,
            "note": self.note,
            "records": self.total_records,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> RunPlan:
        window = d.get("time_window_ms")
        return cls(
            str(d["kind"]),
            tuple(OffsetRange.from_dict(r) for r in d["ranges"]),
            int(d["batch_cap"]),
            d.get("time_budget_seconds"),
            str(d.get("overlap", "refuse")),
            None if window is None else (int(window[0]), int(window[1])),
            d.get("topic_id"),
            d.get("note"),
        )


@dataclass(frozen=True)
class Batch:
    """One batch of a run, as its plan made it: the ranges one transaction commits and how the commit treats them."""

    # ingest: fence on the ledger and advance it; backfill: fence below it, settle overlap; skip: fence and advance,
    # every record a dead letter
    kind: str
    ranges: tuple[OffsetRange, ...]
    number: int | None = None  # 1, 2, ... within its DAG run, counting the batches of earlier tries
    overlap: str = "refuse"
    time_window_ms: tuple[int, int] | None = None
    topic_id: str | None = None
    note: str | None = None

    @property
    def is_backfill(self) -> bool:
        return self.kind == "backfill"

    @property
    def is_skip(self) -> bool:
        return self.kind == "skip"

    @property
    def offsets(self) -> int:
        """The offsets its ranges span (the records, but for transaction markers, aborted and compacted ones)."""
        return sum(r.size for r in self.ranges)


def _position(r: OffsetRange) -> tuple[str, int]:
    return r.topic, r.partition


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
