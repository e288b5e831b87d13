"""The two questions the lag sensors ask, answered from the ledger and Kafka (sync; triggers run them in a thread).

- gate: is there enough work for a run? offset lag >= min_records, or the oldest waiting record older than
  max_wait_seconds. The offsets cost one query and one ListOffsets round trip; the oldest record's timestamp one
  fetch more, and only when some records wait but fewer than min_records.
- health: is the pipeline within its lag SLA? time lag <= max_time_lag_seconds and the state not STALL/STOP/ERR (and,
  with fail_at_risk, no partition AT_RISK of losing unread records to retention).

Each check records the partitions it saw caught up (source "gate" or "sla") in the lag history: between runs, and
on a gated pipeline whose quiet spells start no runs at all, the pokes are what sees a quiet topic caught up, and the
STOP rule counts idleness from there. Partitions with records waiting are not recorded: a poke between runs sees the
last run's position, and a row of those would read as a stuck position (STALL) while a gate waits by design.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from microingest.declare.lag_policy import GatePolicy, SlaPolicy
from microingest.declare.pipeline import Pipeline
from microingest.lag import observations as lag_history
from microingest.lag.figures import PartitionLag, partition_lags, time_lag
from microingest.lag.states import LagState, Observation
from microingest.lag.status import pipeline_status
from microingest.systems.kafka_access import record_timestamps
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import PostgresUnavailableError

UNHEALTHY = (LagState.STALL, LagState.STOP, LagState.ERR)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    met: bool
    summary: str
    offset_lag: int
    time_lag_seconds: float | None = None
    state: str | None = None
    breach: str = ""  # health: "time_lag" or "retention" (fail at once) or "state" (fails after the grace period)

    def to_dict(self) -> dict:
        return asdict(self)


def gate_check(pipeline: Pipeline, gate: GatePolicy, now: datetime | None = None) -> Check:

    now = now or datetime.now(timezone.utc)
    systems = PipelineSystems.of(pipeline)
    lags = partition_lags(pipeline, systems, now, fetch_records=False)
    record_caught_up(pipeline, systems, lags, "gate", now)
    waiting = sum(lag.lag for lag in lags)
    if waiting >= gate.min_records:
        return Check(True, f"{waiting:,} records wait (min_records {gate.min_records:,})", waiting)
    if not waiting:
        return Check(False, "no records wait", 0, 0.0)
    lagging = [lag for lag in lags if lag.lag]
    stamps = {
        (topic, partition): ms
        for topic in sorted({lag.topic for lag in lagging})
        for partition, ms in record_timestamps(
            systems.kafka_client, topic, {lag.partition: lag.position for lag in lagging if lag.topic == topic}
        ).items()
    }
    ages = [time_lag(lag.position, lag.latest, now, stamps.get(lag.key))[0] for lag in lagging]
    oldest = max((a for a in ages if a is not None), default=None)
    seconds = None if oldest is None else oldest.total_seconds()
    if oldest is not None and oldest >= timedelta(seconds=gate.max_wait_seconds):
        return Check(
            True,
            f"{waiting:,} records wait, the oldest for {seconds:.0f}s (max_wait_seconds {gate.max_wait_seconds})",
            waiting,
            seconds,
        )
    age = "unknown age" if seconds is None else f"the oldest for {seconds:.0f}s"
    return Check(
        False,
        f"{waiting:,} records wait ({age}): below min_records {gate.min_records:,} and "
        f"max_wait_seconds {gate.max_wait_seconds}",
        waiting,
        seconds,
    )


def health_check(pipeline: Pipeline, sla: SlaPolicy, now: datetime | None = None) -> Check:

    now = now or datetime.now(timezone.utc)
    systems = PipelineSystems.of(pipeline)
    status = pipeline_status(pipeline, now, systems=systems)
    record_caught_up(pipeline, systems, [lag for lag, _ in status.partitions], "sla", now)
    age = status.time_lag
    seconds = None if age is None else age.total_seconds()
    state = status.verdict.state

    def check(met: bool, summary: str, breach: str = "") -> Check:
        return Check(met, summary, status.offset_lag, seconds, state.name, breach)

    if seconds is not None and seconds > sla.max_time_lag_seconds:
        return check(
            False,
            f"time lag {seconds:.0f}s exceeds max_time_lag_seconds {sla.max_time_lag_seconds} "
            f"({status.offset_lag:,} records wait; state {state.name}: {status.verdict.reason})",
            breach="time_lag",
        )
    if sla.fail_at_risk and status.at_risk:
        (topic, partition), left = status.at_risk[0]
        return check(
            False,
            f"AT_RISK: {topic}[{partition}]'s unread records may be deleted by {left.cause} in "
            f"{left.seconds:.0f}s (retention_margin {status.retention_margin}s)",
            breach="retention",
        )
    if state in UNHEALTHY:
        return check(False, f"state {state.name}: {status.verdict.reason}", breach="state")
    lag_text = "unknown" if seconds is None else f"{seconds:.0f}s"
    return check(True, f"state {state.name}, time lag {lag_text}, {status.offset_lag:,} records wait")


def caught_up(lags: Iterable[PartitionLag], now: datetime) -> list[PartitionLag]:
    """The partitions the state rules will read as caught up (a partition not started on an empty log included)."""
    return [lag for lag in lags if Observation(now, lag.next_offset, lag.latest).caught_up]


def record_caught_up(pipeline: Pipeline, systems, lags: Iterable[PartitionLag], source: str, now: datetime) -> None:
    """Best effort: a check that could not record still answers (the next poke records again)."""

    seen = caught_up(lags, now)
    if not seen:
        return
    try:
        with systems.db() as conn, conn:
            lag_history.record(
                conn,
                pipeline.name,
                {lag.key: lag.next_offset for lag in seen},
                {lag.key: lag.latest for lag in seen},
                source,
                at=now,
            )
    except PostgresUnavailableError as exc:
        log.warning("could not record the caught-up partitions of %s: %s", pipeline.name, exc)
