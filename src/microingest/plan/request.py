"""What an operator asked a DAG run to do, read from its Params: a live run, a backfill by offsets or by time, a
skip of a stuck partition, or a redrive of dead letters.

Airflow validates the Params' types when a run is triggered (JSON schema; HTTP 400 on the REST API). This module
checks what the schema cannot express (combinations of fields, order of times) and turns the values into a
`RunRequest`; what only Kafka or the ledger can judge is checked when the run is planned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any

from microingest.batches import RedriveSelection
from microingest.commit.overlap import OVERLAP_POLICIES
from microingest.plan.offsets import RequestError

TOPIC = "topic"  # which topic a backfill, skip or redrive takes, of a pipeline reading several
BACKFILL_RANGES = "backfill_ranges"
FROM_TIME, UNTIL_TIME = "backfill_from_time", "backfill_until_time"
SKIP_PARTITION, SKIP_UNTIL, SKIP_REASON = "skip_partition", "skip_until_offset", "skip_reason"
REDRIVE, REDRIVE_CLASS, REDRIVE_SINCE = "redrive", "redrive_error_class", "redrive_since"
REDRIVE_PARTITION, REDRIVE_FROM, REDRIVE_UNTIL = "redrive_partition", "redrive_from_offset", "redrive_until_offset"
_REDRIVE_CHOICES = (REDRIVE_CLASS, REDRIVE_SINCE, REDRIVE_PARTITION, REDRIVE_FROM, REDRIVE_UNTIL)


@dataclass(frozen=True)
class SkipRequest:
    """Move one partition's live position to `until`, the records on the way kept as dead letters (plan.skip)."""

    partition: int
    until: int
    reason: str
    topic: str | None = None  # None: the pipeline's only one


@dataclass(frozen=True)
class RedriveRequest:
    """Decode the pipeline's unresolved dead letters again (plan.redrive): those of `selection`, of one topic and in
    one partition (and offsets [from, until) of it) when given."""

    selection: RedriveSelection = field(default_factory=RedriveSelection)
    partition: int | None = None
    offsets: tuple[int, int] | None = None
    topic: str | None = None

    def describe(self) -> str:
        where = "" if self.topic is None else f" of topic {self.topic}"
        where += "" if self.partition is None else f" of partition {self.partition}"
        if self.offsets is not None:
            where += f" offsets [{self.offsets[0]}, {self.offsets[1]})"
        return f"redrive of dead letters{where} ({self.selection.describe()})"


@dataclass(frozen=True)
class RunRequest:
    max_records: int | None = None  # live runs: this run's record cap instead of the pipeline's max_records_per_run
    dry_run: bool = False
    offsets: dict[int, tuple[int, int]] | None = None  # backfill by offsets: partition -> [from, until)
    window: tuple[datetime, datetime] | None = None  # backfill by time: [from, until)
    overlap: str = "refuse"
    field: str = BACKFILL_RANGES  # the param the backfill ranges came from, for error messages
    skip: SkipRequest | None = None
    redrive: RedriveRequest | None = None
    topic: str | None = None  # a backfill's or skip's topic; None: the pipeline's only one (a backfill by time: all)

    @property
    def is_backfill(self) -> bool:
        return self.offsets is not None or self.window is not None

    def describe(self) -> str:
        if self.redrive is not None:
            return self.redrive.describe()
        if self.skip is not None:
            of = "" if self.skip.topic is None else f" of topic {self.skip.topic}"
            return f"skip{of} of partition {self.skip.partition} to offset {self.skip.until} ({self.skip.reason})"
        of = "" if self.topic is None else f" of topic {self.topic}"
        if self.offsets is not None:
            spans = ", ".join(f"{p}: [{lo}, {hi})" for p, (lo, hi) in sorted(self.offsets.items()))
            return f"backfill{of} of offsets {{{spans}}} (overlap {self.overlap})"
        if self.window is not None:
            return (
                f"backfill{of} of records timestamped [{self.window[0].isoformat()}, {self.window[1].isoformat()}) "
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
    topic = params.get(TOPIC)
    if topic is not None and (not isinstance(topic, str) or not topic.strip()):
        raise RequestError(TOPIC, f"must be a topic name, got {topic!r}")
    common = RunRequest(max_records=max_records, dry_run=dry_run, overlap=overlap, topic=topic and topic.strip())

    skip = _skip(params)
    redrive = _redrive(params)
    ranges, start, end = params.get(BACKFILL_RANGES), params.get(FROM_TIME), params.get(UNTIL_TIME)
    if ranges is not None and (start is not None or end is not None):
        raise RequestError(BACKFILL_RANGES, f"give either {BACKFILL_RANGES} or {FROM_TIME}/{UNTIL_TIME}, not both")
    if redrive is not None:
        if skip is not None or ranges is not None or start is not None or end is not None:
            raise RequestError(REDRIVE, "a redrive is a run of its own: give no backfill or skip params with it")
        return replace(common, redrive=replace(redrive, topic=common.topic), topic=None)
    if skip is not None:
        if ranges is not None or start is not None or end is not None:
            raise RequestError(SKIP_PARTITION, "a skip is a run of its own: give no backfill params with it")
        return replace(common, skip=replace(skip, topic=common.topic), topic=None)
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
    if common.topic is not None:
        raise RequestError(TOPIC, "only a backfill, a skip or a redrive takes a topic: a live run reads them all")
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


def _redrive(params: Mapping[str, Any]) -> RedriveRequest | None:
    wanted = params.get(REDRIVE) or False
    if not isinstance(wanted, bool):
        raise RequestError(REDRIVE, f"must be true or false, got {wanted!r}")
    chosen = [name for name in _REDRIVE_CHOICES if params.get(name) is not None]
    if not wanted:
        if chosen:
            raise RequestError(chosen[0], f"only a redrive takes it: set {REDRIVE} to true, or leave it empty")
        return None
    error_class = params.get(REDRIVE_CLASS)
    if error_class is not None and (not isinstance(error_class, str) or not error_class.strip()):
        raise RequestError(REDRIVE_CLASS, f"must be an error class such as wrong_type, got {error_class!r}")
    since = params.get(REDRIVE_SINCE)
    selection = RedriveSelection(
        error_class and error_class.strip(), None if since is None else _time(REDRIVE_SINCE, since)
    )
    numbers = {}
    for name in (REDRIVE_PARTITION, REDRIVE_FROM, REDRIVE_UNTIL):
        value = params.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise RequestError(name, f"must be an integer >= 0, got {value!r}")
        numbers[name] = value
    partition, lo, hi = numbers[REDRIVE_PARTITION], numbers[REDRIVE_FROM], numbers[REDRIVE_UNTIL]
    if (lo is None) != (hi is None):
        raise RequestError(REDRIVE_FROM if lo is None else REDRIVE_UNTIL, "offsets to redrive need both from and until")
    if lo is not None and partition is None:
        raise RequestError(REDRIVE_PARTITION, "offsets to redrive belong to one partition: give it")
    if lo is not None and hi is not None and lo >= hi:
        raise RequestError(REDRIVE_UNTIL, f"must be greater than {REDRIVE_FROM} ({lo} >= {hi})")
    return RedriveRequest(selection, partition, None if lo is None or hi is None else (lo, hi))


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
