"""What `microingest doctor` concludes (pure): the ledger, the batch history, the consumer group mirror, the Asset
events and Kafka's offsets of one pipeline compared, each disagreement in words with what to do. The reads are in
`doctor`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

OK, WARN, BAD = "ok", "warn", "BAD"


@dataclass(frozen=True)
class Finding:
    severity: str  # ok | warn | BAD
    what: str
    todo: str = ""

    def lines(self) -> list[str]:
        return [f"{self.severity:<4} {self.what}"] + ([f"     what to do: {self.todo}"] if self.todo else [])


def kafka_findings(
    topic: str, ledger: Mapping[int, int], earliest: Mapping[int, int], latest: Mapping[int, int]
) -> list[Finding]:
    out = []
    for p, position in sorted(ledger.items()):
        where = f"{topic}[{p}]"
        if p not in latest:
            out.append(
                Finding(
                    BAD,
                    f"{where}: the ledger holds position {position}, but Kafka has no such partition",
                    "was the topic deleted or recreated with fewer partitions? see docs/exactly-once.md",
                )
            )
        elif position > latest[p]:
            out.append(
                Finding(
                    BAD,
                    f"{where}: the ledger's position {position} is beyond the log end {latest[p]}",
                    "the topic was deleted and created again (on_topic_recreated: restart starts it over)",
                )
            )
        elif position < earliest[p]:
            out.append(
                Finding(
                    BAD,
                    f"{where}: retention deleted offsets [{position}, {earliest[p]}) before they were read",
                    "the next run fails naming the gap; on_retention_gap: skip records it "
                    "and goes on (raise the topic's retention or lag.retention_margin to see it coming)",
                )
            )
    if not out:
        out.append(
            Finding(
                OK,
                f"the ledger's positions lie within what Kafka holds of {topic} "
                f"({len(ledger)} of {len(latest)} partition(s) read)",
            )
        )
    return out


def history_findings(
    ledger_rows: Iterable[tuple[str, int, int, str | None, str | None, int | None]],
) -> list[Finding]:
    """`ledger_rows`: (topic, partition, position, the batch the ledger names, that batch's kind in the history or
    None, where that batch's range of the partition ends or None)."""
    out = []
    rows = list(ledger_rows)
    for topic, p, position, batch_id, kind, until in rows:
        if kind is None:
            out.append(
                Finding(
                    BAD,
                    f"{topic}[{p}]: the ledger's position {position} names batch {batch_id}, which "
                    "the batch history lacks",
                    "the ledger was changed outside microingest; compare "
                    "microingest.batches and move positions only by runs, skips or backfills",
                )
            )
        elif until != position:
            out.append(
                Finding(
                    BAD,
                    f"{topic}[{p}]: the ledger's position {position} is not where its batch "
                    f"{batch_id} ({kind}) ended ({until})",
                    "the ledger was changed outside microingest",
                )
            )
    if not out:
        out.append(Finding(OK, f"every position of the ledger ({len(rows)}) is where the batch it names ended"))
    return out


def mirror_findings(
    group: str, topic: str, ledger: Mapping[int, int], mirrored: Mapping[int, int], pinned: Iterable[int] = ()
) -> list[Finding]:
    """`ledger` and `mirrored`: positions on `topic`; `pinned`: its partitions whose position a pin recorded (a
    plan, no job), which the mirror learns only when a batch of theirs commits."""
    out, unmirrored = [], set(pinned)
    for p, position in sorted(ledger.items()):
        at = mirrored.get(p)
        if at is None or at < position:
            if p in unmirrored:
                continue
            behind = "has no offset" if at is None else f"is {position - at:,} behind the ledger ({at} < {position})"
            out.append(
                Finding(
                    WARN,
                    f"{topic}[{p}]: consumer group {group} {behind}",
                    "the mirror is written after each commit, best effort: the next commit mirrors "
                    "again; only Kafka's tools read it",
                )
            )
        elif at > position:
            out.append(
                Finding(
                    BAD,
                    f"{topic}[{p}]: consumer group {group} is ahead of the ledger ({at} > "
                    f"{position}): something else commits offsets to it",
                    "stop that consumer; Kafka's "
                    "tools under-report the lag meanwhile, the pipeline itself reads only the ledger",
                )
            )
    if not out:
        out.append(Finding(OK, f"consumer group {group} agrees with the ledger on {topic}"))
    return out


def announcement_findings(runs: Mapping[tuple[str, str], tuple[set[str], set[str]]]) -> list[Finding]:
    """`runs`: per finished (dag_id, run_id), (its committed batches that change the target, the batch ids its
    Asset events name)."""
    out = []
    for (dag_id, run_id), (committed, announced) in sorted(runs.items()):
        missing = committed - announced
        if missing:
            out.append(
                Finding(
                    BAD,
                    f"DAG run {run_id} committed {len(missing)} batch(es) no Asset event announced "
                    f"({', '.join(sorted(missing)[:3])}{', ...' if len(missing) > 3 else ''})",
                    f"clear the run's announce task (DAG {dag_id}): it announces only what is missing",
                )
            )
    if not out:
        out.append(Finding(OK, f"every batch of the {len(runs)} finished run(s) looked at was announced"))
    return out


def gone_findings(gone: Iterable[str]) -> list[Finding]:
    """Topics the pattern matched, whose positions the ledger keeps, that Kafka no longer lists."""
    return [
        Finding(
            WARN,
            f"topic {topic} matches the pipeline's topic_pattern and the ledger holds positions on it, but Kafka no "
            "longer lists it: nothing is read from it",
            "if it was deleted for good, nothing is lost that was not read already (its positions say how far); "
            "if it comes back under its name, on_topic_recreated decides",
        )
        for topic in gone
    ]


def dead_letter_findings(unresolved: Mapping[str, int]) -> list[Finding]:
    if not unresolved:
        return [Finding(OK, "no unresolved dead letters")]
    classes = ", ".join(f"{c} {n:,}" for c, n in sorted(unresolved.items()))
    return [
        Finding(
            WARN,
            f"{sum(unresolved.values()):,} unresolved dead letter(s): {classes}",
            "once their cause is fixed: microingest redrive (--dry-run first)",
        )
    ]
