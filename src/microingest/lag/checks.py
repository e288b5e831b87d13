"""The two questions the lag sensors ask, answered from the ledger and Kafka (sync; triggers run them in a thread).

- gate: is there enough work for a run? offset lag >= min_records, or the oldest waiting record older than
  max_wait_seconds. The offsets cost one query and one ListOffsets round trip; the oldest record's timestamp one
  fetch more, and only when some records wait but fewer than min_records.
- health: is the pipeline within its lag SLA? time lag <= max_time_lag_seconds and the state not STALL/STOP/ERR.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone

from microingest.declarations import Pipeline
from microingest.lag.figures import partition_lags, time_lag
from microingest.lag.policy import GatePolicy, SlaPolicy
from microingest.lag.states import LagState

UNHEALTHY = (LagState.STALL, LagState.STOP, LagState.ERR)


@dataclass(frozen=True)
class Check:
    met: bool
    summary: str
    offset_lag: int
    time_lag_seconds: float | None = None
    state: str | None = None
    breach: str = ""  # health: "time_lag" (fails at once) or "state" (fails after the grace period)

    def to_dict(self) -> dict:
        return asdict(self)


def gate_check(pipeline: Pipeline, gate: GatePolicy, now: datetime | None = None) -> Check:
    from microingest.connections import get_connection, kafka_python_config
    from microingest.kafka_access import record_timestamps

    now = now or datetime.now(timezone.utc)
    lags = partition_lags(pipeline, now, fetch_records=False)
    waiting = sum(lag.lag for lag in lags)
    if waiting >= gate.min_records:
        return Check(True, f"{waiting:,} records wait (min_records {gate.min_records:,})", waiting)
    if not waiting:
        return Check(False, "no records wait", 0, 0.0)
    lagging = {lag.partition: lag.position for lag in lags if lag.lag}
    stamps = record_timestamps(kafka_python_config(get_connection(pipeline.kafka_conn_id)), pipeline.topic, lagging)
    ages = [time_lag(lag.position, lag.latest, now, stamps.get(lag.partition))[0] for lag in lags if lag.lag]
    oldest = max((a for a in ages if a is not None), default=None)
    seconds = None if oldest is None else oldest.total_seconds()
    if oldest is not None and oldest >= timedelta(seconds=gate.max_wait_seconds):
        return Check(True, f"{waiting:,} records wait, the oldest for {seconds:.0f}s (max_wait_seconds "
                           f"{gate.max_wait_seconds})", waiting, seconds)
    age = "unknown age" if seconds is None else f"the oldest for {seconds:.0f}s"
    return Check(False, f"{waiting:,} records wait ({age}): below min_records {gate.min_records:,} and "
                        f"max_wait_seconds {gate.max_wait_seconds}", waiting, seconds)


def health_check(pipeline: Pipeline, sla: SlaPolicy, now: datetime | None = None) -> Check:
    from microingest.lag.status import pipeline_status

    status = pipeline_status(pipeline, now)
    age = status.time_lag
    seconds = None if age is None else age.total_seconds()
    state = status.verdict.state
    common = {"offset_lag": status.offset_lag, "time_lag_seconds": seconds, "state": state.name}
    if seconds is not None and seconds > sla.max_time_lag_seconds:
        return Check(False, f"time lag {seconds:.0f}s exceeds max_time_lag_seconds {sla.max_time_lag_seconds} "
                            f"({status.offset_lag:,} records wait; state {state.name}: {status.verdict.reason})",
                     breach="time_lag", **common)
    if state in UNHEALTHY:
        return Check(False, f"state {state.name}: {status.verdict.reason}", breach="state", **common)
    lag_text = "unknown" if seconds is None else f"{seconds:.0f}s"
    return Check(True, f"state {state.name}, time lag {lag_text}, {status.offset_lag:,} records wait", **common)
