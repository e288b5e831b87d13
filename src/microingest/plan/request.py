"""What an operator asked a DAG run to do, read from its Params: a live run, a backfill by offsets or by time, or a
skip of a stuck partition.

Airflow validates the Params' types when a run is triggered (JSON schema; HTTP 400 on the REST API). This module
checks what the schema cannot express (combinations of fields, order of times) and turns the values into a
`RunRequest`; what only Kafka or the ledger can judge is checked when the run is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from microingest.commit.overlap import OVERLAP_POLICIES
from microingest.plan.offsets import RequestError

BACKFILL_RANGES = "backfill_ranges"
FROM_TIME, UNTIL_TIME = "backfill_from_time", "backfill_until_time"
SKIP_PARTITION, SKIP_UNTIL, SKIP_REASON = "skip_partition", "skip_until_offset", "skip_reason"


@dataclass(frozen=True)
class SkipRequest:
    """Move one partition's live position to `until`, the records on the way kept as dead letters (plan.skip)."""

    partition: int
    until: int
    reason: str


@dataclass(frozen=True)
class RunRequest:
    max_records: int | None = None  # live runs: this run's record cap instead of the pipeline's max_records_per_run
    dry_run: bool = False
    offsets: dict[int, tuple[int, int]] | None = None  # backfill by offsets: partition -> [from, until)
    window: tuple[datetime, datetime] | None = None  # backfill by time: [from, until)
    overlap: str = "refuse"
    field: str = BACKFILL_RANGES  # the param the backfill ranges came from, for error messages
    skip: SkipRequest | None = None

    @property
    def is_backfill(self) -> bool:
        return self.offsets is not None or self.window is not None

    def describe(self) -> str:
        if self.skip is not None:
            return f"skip of partition {self.skip.partition} to offset {self.skip.until} ({self.skip.reason})"
        if self.offsets is not None:
            spans = ", ".join(f"{p}: [{lo}, {hi})" for p, (lo, hi) in sorted(self.offsets.items()))
            return f"backfill of offsets {{{spans}}} (overlap {self.overlap})"
        if self.window is not None:
            return (
                f"backfill of records timestamped [{self.window[0].isoformat()}, {self.window[1].isoformat()}) "
                f"(overlap {self.overlap})"
            )
        cap = f", at most {self.max_records} records" if self.max_records else ""
        return f"live run{cap}"


def parse_request(
    params: Mapping[str, Any],
    run_type: str | None = None,
    data_interval: tuple[datetime | None, datetime | None] | None = None,
) -> RunRequest:
    """A run's Params (and, for Airflow's own backfill runs, its data interval) -> RunRequest."""
    max_records = params.get("max_records")
    if max_records is not None and (
        isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1
    ):
        raise RequestError("max_records", f"must be a positive integer, got {max_records!r}")
    dry_run = params.get("dry_run") or False
    if not isinstance(dry_run, bool):
        raise RequestError("dry_run", f"must be true or false, got {dry_run!r}")
    overlap = params.get("overlap") or "refuse"
    if overlap not in OVERLAP_POLICIES:
        raise RequestError("overlap", f"must be one of {', '.join(OVERLAP_POLICIES)}, got {overlap!r}")
    common = RunRequest(max_records=max_records, dry_run=dry_run, overlap=overlap)

    skip = _skip(params)
    ranges, start, end = params.get(BACKFILL_RANGES), params.get(FROM_TIME), params.get(UNTIL_TIME)
    if ranges is not None and (start is not None or end is not None):
        raise RequestError(BACKFILL_RANGES, f"give either {BACKFILL_RANGES} or {FROM_TIME}/{UNTIL_TIME}, not both")
    if skip is not None:
        if ranges is not None or start is not None or end is not None:
            raise RequestError(SKIP_PARTITION, "a skip is a run of its own: give no backfill params with it")
        return replace(common, skip=skip)
    if ranges is not None:
        return replace(common, offsets=_offsets(ranges))
    if start is not None or end is not None:
        if start is None or end is None:
            raise RequestError(
                FROM_TIME if start is None else UNTIL_TIME, f"a time window needs both {FROM_TIME} and {UNTIL_TIME}"
            )
        window = (_time(FROM_TIME, start), _time(UNTIL_TIME, end))
        if window[0] >= window[1]:
            raise RequestError(UNTIL_TIME, f"must be later than {FROM_TIME} ({start} >= {end})")
        return replace(common, window=window, field=FROM_TIME)
    if run_type == "backfill":
        interval_start, interval_end = data_interval or (None, None)
        if interval_start is None or interval_end is None or interval_start >= interval_end:
            raise RequestError(
                "data_interval", f"an Airflow backfill run replays its data interval, got {data_interval}"
            )
        return replace(common, window=(interval_start, interval_end), field="data_interval")
    return common


def _skip(params: Mapping[str, Any]) -> SkipRequest | None:
    given = {name: params.get(name) for name in (SKIP_PARTITION, SKIP_UNTIL, SKIP_REASON)}
    if all(v is None for v in given.values()):
        return None
    positions: list[int] = []
    for name in (SKIP_PARTITION, SKIP_UNTIL):
        value = given[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise RequestError(
                name,
                f"a skip needs {SKIP_PARTITION}, {SKIP_UNTIL} and {SKIP_REASON}; {name} must "
                f"be an integer >= 0, got {value!r}",
            )
        positions.append(value)
    reason = given[SKIP_REASON]
    if not isinstance(reason, str) or not reason.strip():
        raise RequestError(SKIP_REASON, "a skip needs a reason: it is kept with the skipped records and in the history")
    if "\x00" in reason or not _storable(reason):
        raise RequestError(SKIP_REASON, "must be text Postgres can keep (no NUL character, no lone surrogate)")
    return SkipRequest(positions[0], positions[1], reason.strip())


def _storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _offsets(raw: Any) -> dict[int, tuple[int, int]]:
    if not isinstance(raw, Mapping) or not raw:
        raise RequestError(BACKFILL_RANGES, 'must map partitions to [from, until], e.g. {"0": [100, 5000]}')
    out = {}
    for key, span in raw.items():
        where = f"{BACKFILL_RANGES}['{key}']"
        if not str(key).isdigit():
            raise RequestError(where, f"partition must be a non-negative integer, got {key!r}")
        if (
            not isinstance(span, (list, tuple))
            or len(span) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in span)
        ):
            raise RequestError(where, f"must be [from, until] with non-negative integer offsets, got {span!r}")
        out[int(key)] = (span[0], span[1])
    return out


def _time(field: str, value: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    else:
        try:
            parsed = datetime.fromisoformat(str(value))
        except ValueError:
            raise RequestError(field, f"must be an ISO-8601 date-time, got {value!r}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)
