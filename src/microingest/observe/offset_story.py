"""The story of one offset of a pipeline's topic, told from what the platform keeps (pure: `offset_reads` gathers the
facts): which batch read it and what became of it (a target row, an aggregate's group, a dead letter and whether a
redrive resolved it, a skip, a retention gap), or why no batch did; and whether Kafka's consumer group mirror agrees
with the ledger on the partition."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class BatchMention:
    batch_id: str
    kind: str
    committed_at: datetime
    dag_id: str | None = None
    run_id: str | None = None
    note: str | None = None
    filtered: int = 0  # records of the batch its transform_sql filtered out

    def __str__(self) -> str:
        run = f", DAG run {self.run_id}" if self.run_id else ""
        note = f" ({self.note})" if self.note else ""
        return f"{self.kind} batch {self.batch_id}{run}, committed {self.committed_at:%Y-%m-%d %H:%M:%S %Z}{note}"


@dataclass(frozen=True)
class DeadLetterFacts:
    error_class: str
    error_message: str
    batch_id: str
    created_at: datetime
    resolved_by: str | None = None
    resolved_at: datetime | None = None
    redrives: int = 0


@dataclass
class OffsetFacts:
    """What the ledger, the history, the dead letters, the target and Kafka say of one position."""

    pipeline: str
    sink_mode: str
    target_table: str
    topic: str
    partition: int
    offset: int
    earliest: int | None = None  # what Kafka retains of the partition: [earliest, latest)
    latest: int | None = None
    position: int | None = None  # the ledger's next offset; None: the partition was never read
    mirrored: int | None = None  # the consumer group's committed offset
    read_by: list[BatchMention] = field(default_factory=list)  # batches whose ranges hold the offset
    lost_in: list[BatchMention] = field(default_factory=list)  # batches that recorded a gap over it
    dead_letter: DeadLetterFacts | None = None
    row_key: str | None = None  # the target row at this position (append, upsert_latest): its record key
    has_row: bool = False
    in_kafka: bool | None = None  # whether Kafka holds a record at the offset (None: not looked)
    key_holds: int | None = None  # upsert_latest: the offset the record's key's row now comes from
    group: dict | None = None  # aggregate: the group the record counts in


def story(f: OffsetFacts) -> list[str]:
    """The offset's story, most important first."""
    where = f"{f.topic}[{f.partition}]@{f.offset}"
    lines = [f"{where} of pipeline {f.pipeline}: {_what_became(f)}"]
    lines += [f"  read by {b}" for b in f.read_by]
    lines += [f"  lost in the gap recorded by {b}" for b in f.lost_in]
    lines.append(f"  {_positions(f)}")
    return lines


def _what_became(f: OffsetFacts) -> str:
    dead = f.dead_letter
    if f.latest is not None and f.offset >= f.latest and not f.read_by:
        return f"not written yet: the partition's log ends at {f.latest}"
    if dead is not None and dead.resolved_by is None:
        if dead.error_class == "skipped":
            return f"skipped, kept as a dead letter: {dead.error_message}"
        tried = f"; redriven {dead.redrives} time(s), still failing" if dead.redrives else ""
        return f"a dead letter ({dead.error_class}: {dead.error_message}){tried}"
    landed = _landed(f)
    if dead is not None:
        at = f"{dead.resolved_at:%Y-%m-%d %H:%M:%S %Z}" if dead.resolved_at else "?"
        return f"a dead letter ({dead.error_class}), resolved by redrive batch {dead.resolved_by} at {at}: {landed}"
    if f.read_by:
        return landed
    if f.lost_in:
        return "lost: retention deleted it before it was read (the gap is recorded in the history)"
    if f.earliest is not None and f.offset < f.earliest and f.position is not None and f.offset >= f.position:
        return (
            f"lost: retention deleted it before it was read (Kafka holds from {f.earliest}); the next run fails "
            "naming the gap, or with on_retention_gap: skip records it"
        )
    if f.position is None or f.offset >= f.position:
        waiting = "" if f.position is None else f" (the live position is {f.position})"
        return f"not read yet{waiting}"
    if f.earliest is not None and f.offset < f.earliest:
        return "before the pipeline's start, and deleted by retention since: no batch of this pipeline read it"
    return "before the pipeline's start (start_from latest): no batch of this pipeline read it; a backfill can"


def _landed(f: OffsetFacts) -> str:
    if f.has_row:
        key = f" with key {f.row_key!r}" if f.sink_mode == "upsert_latest" else ""
        return f"a row of {f.target_table}{key}"
    if f.in_kafka is False:
        return "no record there (a transaction marker, an aborted or compacted record): nothing to ingest"
    filtering = [b for b in f.read_by if b.filtered]
    if filtering:
        # The history counts a batch's filtered records, not which: the story says what it knows.
        return (
            f"read, and {f.target_table} holds no row for it: the transform_sql of batch {filtering[-1].batch_id} "
            f"filtered {filtering[-1].filtered} of its records out, this one among them unless its row was deleted "
            "from the target since (microingest doctor)"
        )
    if f.sink_mode == "aggregate":
        group = f" in the group {f.group}" if f.group else " (Kafka no longer holds it to name its group)"
        return f"counted in {f.target_table}{group}"
    if f.sink_mode == "upsert_latest":
        if f.key_holds is not None:
            return f"superseded: its key's row in {f.target_table} now comes from offset {f.key_holds}"
        return f"not in {f.target_table}: its key was deleted by a tombstone, or Kafka no longer holds it to tell"
    return f"read, but {f.target_table} holds no row for it: it was deleted from the target since (microingest doctor)"


def _positions(f: OffsetFacts) -> str:
    ledger = "never read" if f.position is None else f"live position {f.position}"
    if f.mirrored is None:
        mirror = "the consumer group mirror has no offset for it"
    elif f.mirrored == f.position:
        mirror = "the consumer group mirror agrees"
    else:
        mirror = f"the consumer group mirror says {f.mirrored} (best effort: the next commit mirrors again)"
    kafka = "" if f.earliest is None else f"; Kafka holds [{f.earliest}, {f.latest})"
    return f"partition {f.partition}: {ledger}, {mirror}{kafka}"


def to_dict(f: OffsetFacts) -> dict:
    out = asdict(f)
    out["story"] = story(f)
    return out
