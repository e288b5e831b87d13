"""The shapes every stage shares, on the ground floor: what a run reads (offset ranges, where a pipeline stands), how
it is cut (run plans and their batches), who asked (run info), what the executors prove they read (spans) and what the
commit reports (commit results, run outcomes, committed batches). Plan, decode, spark, commit and observe import
these downward; each crosses a process boundary (XCom, the job's argv and outcome file, the batch history) through
its one to_dict/from_dict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import NamedTuple

from microingest.errors import MicroingestError, PlanningError


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


class Positions(NamedTuple):
    """Where a pipeline is on one topic and what Kafka holds, per partition: the ledger's next offset to read (no
    entry for a partition never read), the earliest offset Kafka retains, and the latest (the end under
    read_committed)."""

    ledger: Mapping[int, int]
    earliest: Mapping[int, int]
    latest: Mapping[int, int]


# A partition of one of a pipeline's topics, as lag figures, observations and horizons key it.
PartitionId = tuple[str, int]


class Sources(NamedTuple):
    """Where a pipeline is on each topic it reads now (the topics declared, or those matching its pattern), and the
    topics its ledger holds positions on that Kafka no longer lists: reported, their positions kept, never read."""

    positions: Mapping[str, Positions]
    gone: tuple[str, ...] = ()
    held: frozenset[str] = frozenset()  # the topics the ledger holds positions on, read now or not
    # A pattern's pipeline planned before any topic matched (`ledger.record_waiting`): every topic it comes to read
    # joins it, as one that comes to match beside others does.
    waited: bool = False
    # Kafka's id of each topic read now, as it was when the positions' bounds were read (a topic deleted and created
    # again under its name has a new one)
    topic_ids: Mapping[str, str] = {}

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted(self.positions))


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
# position forward, every record on the way kept as a dead letter; redrive: dead letters decoded again, read from
# Postgres, the ledger untouched.
RUN_KINDS = ("ingest", "backfill", "skip", "redrive")


@dataclass(frozen=True)
class RedriveSelection:
    """Which unresolved dead letters a redrive takes, besides its plan's ranges: one error class, or those written
    since a time (either, both or neither)."""

    error_class: str | None = None
    since: datetime | None = None

    def describe(self) -> str:
        parts = [f"error class {self.error_class}"] if self.error_class else []
        parts += [f"written since {self.since.isoformat()}"] if self.since else []
        return ", ".join(parts) or "every error class"

    def to_dict(self) -> dict:
        return {"error_class": self.error_class, "since": None if self.since is None else self.since.isoformat()}

    @classmethod
    def from_dict(cls, d: Mapping) -> RedriveSelection:
        since = d.get("since")
        return cls(d.get("error_class"), None if since is None else datetime.fromisoformat(since))


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
    # Kafka's id of each topic planned from (absent where the broker gave none): the commit refuses a topic made again
    # since
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    note: str | None = None  # skips: who skipped and why, kept with every skipped record and in the history
    # redrives: which dead letters inside the ranges; the job reads them page by page (`spark.redrive`), never by
    # next_batch, since they lie scattered over their ranges
    redrive: RedriveSelection | None = None

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
                self.topic_ids,
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
            "topic_ids": dict(self.topic_ids),
            "note": self.note,
            "redrive": None if self.redrive is None else self.redrive.to_dict(),
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
            _topic_ids(d),
            d.get("note"),
            None if d.get("redrive") is None else RedriveSelection.from_dict(d["redrive"]),
        )


def _topic_ids(d: Mapping) -> dict[str, str]:
    """A plan's topic ids; one made before pipelines read several topics has its one topic's id as `topic_id`."""
    if d.get("topic_ids") is not None:
        return dict(d["topic_ids"])
    old = d.get("topic_id")
    return {} if old is None else {str(r["topic"]): str(old) for r in d["ranges"]}


@dataclass(frozen=True)
class Batch:
    """One batch of a run, as its plan made it: the ranges one transaction commits and how the commit treats them."""

    # ingest: fence on the ledger and advance it; backfill: fence below it, settle overlap; skip: fence and advance,
    # every record a dead letter; redrive: the pipeline's lock alone, dead letters resolved or kept
    kind: str
    ranges: tuple[OffsetRange, ...]
    number: int | None = None  # 1, 2, ... within its DAG run, counting the batches of earlier tries
    overlap: str = "refuse"
    time_window_ms: tuple[int, int] | None = None
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    note: str | None = None

    @property
    def is_backfill(self) -> bool:
        return self.kind == "backfill"

    @property
    def is_skip(self) -> bool:
        return self.kind == "skip"

    @property
    def is_redrive(self) -> bool:
        return self.kind == "redrive"

    @property
    def offsets(self) -> int:
        """The offsets its ranges span (the records, but for transaction markers, aborted and compacted ones)."""
        return sum(r.size for r in self.ranges)


def _position(r: OffsetRange) -> tuple[str, int]:
    return r.topic, r.partition


@dataclass(frozen=True)
class RunInfo:
    """Who asked for the batch (the DAG run and task try) and which Spark application ran it; recorded in the
    history row. What kind of batch it is comes from the plan, not from here."""

    dag_id: str | None = None
    run_id: str | None = None
    task_try: int | None = None
    clear_number: int = 0  # how often the DAG run was cleared (Airflow's dag_run.clear_number)
    spark_app_id: str | None = field(default=None, kw_only=True)  # set by the job once its session is up

    def to_dict(self) -> dict:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_try": self.task_try,
            "clear_number": self.clear_number,
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> RunInfo:
        return cls(**(d or {}))


@dataclass(frozen=True)
class CommitResult:
    """What one committed batch did."""

    batch_id: str
    rows_written: int
    records_read: int
    dead_letters: int
    ranges: tuple[OffsetRange, ...]
    skipped: int = 0  # backfill, overlap skip_existing: records whose positions were already there


@dataclass(frozen=True)
class JobFailure:
    """Why a job stopped before committing its next batch (a MicroingestError, as it crosses to the operator), and
    whether a retry may meet something else."""

    error_class: str
    error: str
    retryable: bool

    @classmethod
    def of(cls, exc: MicroingestError) -> JobFailure:
        return cls(type(exc).__name__, str(exc), exc.retryable)


@dataclass
class RunOutcome:
    """What one DAG run has committed (over all its task tries), and why its job stopped if it failed: what the job
    reports to the operator (its one channel for it: the exit code only tells a person at a shell), what the ingest
    task returns as XCom, and what a retry starts from."""

    batches: int = 0
    records_read: int = 0
    rows_written: int = 0
    dead_letters: int = 0
    skipped: int = 0  # backfill, overlap skip_existing: records whose positions were already there
    remaining: int = 0  # records of the run's plan left for the next run (time budget spent)
    ranges: tuple[OffsetRange, ...] = ()  # what was committed, so a retry can leave it out of its plan
    failure: JobFailure | None = None

    def add(self, batch: CommitResult) -> None:
        self.extend(
            RunOutcome(
                1, batch.records_read, batch.rows_written, batch.dead_letters, batch.skipped, ranges=batch.ranges
            )
        )

    def extend(self, earlier: RunOutcome) -> None:
        """Count in what earlier tries of the run committed."""
        self.batches += earlier.batches
        self.records_read += earlier.records_read
        self.rows_written += earlier.rows_written
        self.dead_letters += earlier.dead_letters
        self.skipped += earlier.skipped
        self.ranges += earlier.ranges

    def to_dict(self) -> dict:
        """The outcome as the job reports it and the ingest task returns it, a failure's reason included (ranges stay
        out: XCom is for people and later tasks, the history holds them)."""
        failure = {} if self.failure is None else asdict(self.failure)
        return {
            "status": "committed" if self.failure is None else "failed",
            "batches": self.batches,
            "records_read": self.records_read,
            "rows_written": self.rows_written,
            "dead_letters": self.dead_letters,
            "skipped": self.skipped,
            "remaining": self.remaining,
            **failure,
        }

    @classmethod
    def from_dict(cls, d: Mapping) -> RunOutcome:
        counts = {k: d.get(k, 0) for k in ("batches", "records_read", "rows_written", "dead_letters", "skipped")}
        failure = None
        if d["status"] == "failed":
            failure = JobFailure(d["error_class"], d["error"], d["retryable"])
        return cls(**counts, remaining=d.get("remaining", 0), failure=failure)


@dataclass(frozen=True)
class CommittedBatch:
    """One history row of a run, as what comes after the commit (announcements, notes, lineage) reads it."""

    batch_id: str
    kind: str
    run_batch: int | None
    ranges: tuple[OffsetRange, ...]
    records_read: int
    rows_written: int
    dead_letters: int
    started_at: datetime
    committed_at: datetime


class Span(NamedTuple):
    topic: str
    partition: int
    first: int
    last: int
    records: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] offsets {self.first}..{self.last} ({self.records} records)"


class StoredRecord(NamedTuple):
    """A dead letter's record, whole, as it was read from Kafka."""

    topic: str
    partition: int
    offset: int
    kafka_timestamp: datetime | None  # None when Kafka's was beyond what Postgres holds
    key: bytes | None
    value: bytes | None
    headers: list[dict] | None  # as the dead-letter table keeps them (`staged_rows.stored_headers`)


class DeadLetterNote(NamedTuple):
    """Where a dead letter came from and why: the few a refused batch names travel typed beside the COPY text."""

    topic: str
    partition: int
    offset: int
    error_class: str
    message: str

    def __str__(self) -> str:
        # A record's text may hold line breaks: escaped, as COPY text has them, it cannot forge a line of a log.
        message = self.message.translate(_ESCAPED)
        return f"{self.topic}[{self.partition}]@{self.offset} {self.error_class}: {message}"


_ESCAPED = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


NOTED_DEAD_LETTERS = 3  # per decoded Arrow batch, and in a refused batch's message

# Every withheld dead letter's reason opens with this (a masked pipeline's: `staged_rows.WITHHELD`), so a redrive,
# which would read its missing record as a tombstone, can leave it out whatever the declaration says today.
WITHHELD_MARK = "withheld: "


class LayoutColumn(NamedTuple):
    name: str
    pg_type: str
    holds: str


# A decoded row, as the executors write it and the commit COPYs it (into the target, or a merge's temp table): these
# columns, then the declared value fields in their order. No value field may take one of these names.
ROW_LAYOUT = (
    LayoutColumn("source_topic", "text", "the Kafka topic of each record"),
    LayoutColumn("source_partition", "integer", "the Kafka partition of each record"),
    LayoutColumn("source_offset", "bigint", "the Kafka offset of each record"),
    LayoutColumn("kafka_timestamp", "timestamptz", "the Kafka timestamp of each record"),
    LayoutColumn("batch_id", "uuid", "the batch that wrote each row"),
    LayoutColumn("record_key", "text", "the Kafka record key"),
    LayoutColumn("is_tombstone", "boolean", "marking tombstones (records with a null value)"),
)
ROW_COLUMNS = tuple(c.name for c in ROW_LAYOUT)
# The source position: columns every target row carries besides the declared value fields.
SOURCE_COLUMNS = ROW_COLUMNS[:5]

# A dead letter: its columns besides its pipeline, in the order a decoded batch's COPY text gives them.
DEAD_LETTER_TYPES = {
    "batch_id": "uuid",
    "topic": "text",
    "partition": "integer",
    "offset": "bigint",
    "kafka_timestamp": "timestamptz",
    "record_key": "bytea",
    "record_value": "bytea",
    "headers": "jsonb",
    "error_class": "text",
    "error_message": "text",
}
DEAD_LETTER_COLUMNS = tuple(DEAD_LETTER_TYPES)
