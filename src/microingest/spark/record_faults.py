"""Which records a SQL statement fails on, when it fails on a value (an ANSI cast, a division by zero): the batch's
positions halved until each failing slice is one record. Pure: the probe that runs the statement over a slice is the
caller's (`sql_transform`).

A statement that maps each record to at most one row (`declare.sql_statement`) fails on a slice exactly when it fails
on one of its records, so the halving finds every such record, at about two probes per halving step each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from microingest.batches import Span


class Slice(NamedTuple):
    """Offsets first..last (inclusive) of one topic partition."""

    topic: str
    partition: int
    first: int
    last: int

    @property
    def size(self) -> int:
        return self.last - self.first + 1


class RecordFault(NamedTuple):
    topic: str
    partition: int
    offset: int
    message: str


class UnplacedFaultError(Exception):
    """The statement fails on the batch but on none of its halves: it does not fail record by record."""


class TooManyFaultsError(Exception):
    """More records fail than the search looks for: `found` holds those found so far."""

    def __init__(self, found: list[RecordFault]):
        super().__init__(f"the statement fails on more than {len(found)} records")
        self.found = found


# What a value `sql_transform.statement_sql` holds unstorable fails with (raise_error's message begins so).
UNSTORED_MARK = "transform_sql gave"


def value_fault(exc: Exception) -> str | None:
    """The message of a query that failed on a record's value, else None: a data exception (SQLSTATE class 22: an
    invalid cast, a division by zero, an overflow), but not the Kafka source's own (KAFKA_DATA_LOSS is 22000 too),
    or a raised error (P0001: raise_error or assert_true, the statement's or `sql_transform.statement_sql`'s)."""
    state = str(getattr(exc, "getSqlState", lambda: None)() or "")
    condition = fault_condition(str(exc))
    if not (state.startswith("22") or state == "P0001") or condition.startswith("[KAFKA_"):
        return None
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else state


def fault_condition(message: str) -> str:
    """The error condition a Spark message opens with (`[CAST_INVALID_INPUT]`), without the rest, which may quote a
    record's value; or the message's first words when it names none."""
    first = message.strip().split("\n", 1)[0]
    if first.startswith("["):
        return first.split("]", 1)[0] + "]"
    return " ".join(first.split()[:3])


# A probe runs the statement over the slices: the error's message when it fails on a value, else None.
Probe = Callable[[Sequence[Slice]], str | None]


def slices_of(spans: Sequence[Span]) -> list[Slice]:
    """The positions the spans read, one slice per topic partition from its first offset to its last."""
    bounds: dict[tuple[str, int], tuple[int, int]] = {}
    for s in spans:
        low, high = bounds.get((s.topic, s.partition), (s.first, s.last))
        bounds[(s.topic, s.partition)] = (min(low, s.first), max(high, s.last))
    return [Slice(t, p, low, high) for (t, p), (low, high) in sorted(bounds.items())]


def halves(slices: Sequence[Slice]) -> tuple[list[Slice], list[Slice]]:
    """The slices cut into two of (nearly) as many offsets each, a slice split where the cut falls."""
    half = sum(s.size for s in slices) // 2
    left: list[Slice] = []
    right: list[Slice] = []
    taken = 0
    for s in slices:
        if taken >= half:
            right.append(s)
        elif taken + s.size <= half:
            left.append(s)
        else:
            cut = s.first + (half - taken)
            left.append(s._replace(last=cut - 1))
            right.append(s._replace(first=cut))
        taken += s.size
    return left, right


def faulty_records(slices: Sequence[Slice], message: str, probe: Probe, limit: int) -> list[RecordFault]:
    """The records of `slices` (on which the statement failed with `message`) it fails on, each with its own
    message. TooManyFaultsError past `limit` of them; UnplacedFaultError when no half fails."""
    found: list[RecordFault] = []
    _search(list(slices), message, probe, limit, found)
    return found


def _search(slices: list[Slice], message: str, probe: Probe, limit: int, found: list[RecordFault]) -> None:
    if sum(s.size for s in slices) == 1:
        if len(found) >= limit:
            raise TooManyFaultsError(found)
        only = slices[0]
        found.append(RecordFault(only.topic, only.partition, only.first, message))
        return
    before = len(found)
    for half in halves(slices):
        failed = probe(half) if half else None
        if failed is not None:
            _search(half, failed, probe, limit, found)
    if len(found) == before:
        raise UnplacedFaultError(message)
