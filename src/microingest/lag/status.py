"""A pipeline's lag status, as the CLI, the lag page and the lag sensors show it: its state and why, per-partition
offset and time lag with their own states, and its last batches."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from microingest.declare.pipeline import Pipeline
from microingest.lag import observations as lag_history
from microingest.lag.figures import PartitionLag, partition_lags
from microingest.lag.states import (
    LagState,
    Observation,
    Rules,
    Verdict,
    default_window,
    evaluate_partition,
    worst,
)
from microingest.systems.kafka_access import KafkaAccessError
from microingest.systems.pipeline_systems import PipelineSystems

POINTS_SPAN = timedelta(hours=6)  # observations read for time-lag interpolation


@dataclass(frozen=True)
class BatchSummary:
    committed_at: datetime
    kind: str
    records_read: int
    rows_written: int
    dead_letters: int
    seconds: float
    note: str | None = None  # an operator's batch (a skip): who and why

    @property
    def rows_per_second(self) -> float:
        return self.rows_written / self.seconds if self.seconds > 0 else 0.0


@dataclass
class PipelineStatus:
    pipeline: str
    topic: str
    verdict: Verdict
    window: timedelta
    last_commit: datetime | None = None
    partitions: list[tuple[PartitionLag, Verdict]] = field(default_factory=list)
    batches: list[BatchSummary] = field(default_factory=list)

    @property
    def offset_lag(self) -> int:
        return sum(p.lag for p, _ in self.partitions)

    @property
    def time_lag(self) -> timedelta | None:
        """The oldest waiting record's age over all partitions (None when some lagging partition's is unknown)."""
        ages = [p.time_lag for p, _ in self.partitions if p.lag]
        known = [a for a in ages if a is not None]
        return None if len(known) < len(ages) else max(known, default=timedelta(0))

    def to_dict(self) -> dict:
        def seconds(delta):
            return None if delta is None else round(delta.total_seconds(), 3)

        return {
            "pipeline": self.pipeline,
            "topic": self.topic,
            "state": self.verdict.state.name,
            "reason": self.verdict.reason,
            "window_seconds": seconds(self.window),
            "last_commit": self.last_commit.isoformat() if self.last_commit else None,
            "offset_lag": self.offset_lag,
            "time_lag_seconds": seconds(self.time_lag),
            "partitions": [
                {
                    "partition": p.partition,
                    "position": p.position,
                    "last_stable_offset": p.latest,
                    "offset_lag": p.lag,
                    "time_lag_seconds": seconds(p.time_lag),
                    "time_lag_source": p.time_source or None,
                    "state": v.state.name,
                    "reason": v.reason,
                }
                for p, v in self.partitions
            ],
            "batches": [
                {
                    "committed_at": b.committed_at.isoformat(),
                    "kind": b.kind,
                    "records_read": b.records_read,
                    "rows_written": b.rows_written,
                    "dead_letters": b.dead_letters,
                    "seconds": round(b.seconds, 3),
                    "rows_per_second": round(b.rows_per_second, 1),
                    "note": b.note,
                }
                for b in self.batches
            ],
        }


def window_of(pipeline: Pipeline) -> timedelta:
    """The state window: as declared (`lag.window_seconds`), else from the schedule and the gate's wait."""
    policy = pipeline.lag
    if policy.window_seconds:
        return timedelta(seconds=policy.window_seconds)
    gate_wait = timedelta(seconds=policy.gate.max_wait_seconds) if policy.gate else None
    return default_window(pipeline.schedule, gate_wait)


def pipeline_status(
    pipeline: Pipeline, now: datetime | None = None, fetch_records: bool = True, last_batches: int = 5, systems=None
) -> PipelineStatus:
    """Read the ledger, Kafka and the recorded history; judge each partition and the pipeline. `systems`: the
    pipeline's PipelineSystems, resolved here when not given."""

    now = now or datetime.now(timezone.utc)
    rules = Rules(window=window_of(pipeline))
    systems = systems or PipelineSystems.of(pipeline)
    with systems.db() as conn:
        history = lag_history.observations(conn, pipeline.name, now - max(rules.window, POINTS_SPAN))
        last_commit = lag_history.last_commit(conn, pipeline.name)
        error = lag_history.planning_error(conn, pipeline.name)
        batches = recent_batches(conn, pipeline.name, last_batches)
    status = PipelineStatus(
        pipeline.name, pipeline.topic, Verdict(LagState.OK, ""), rules.window, last_commit, batches=batches
    )
    try:
        points = {p: [(o.at, o.end) for o in obs] for p, obs in history.items()}
        lags = partition_lags(pipeline, systems, now, points, fetch_records)
    except KafkaAccessError as exc:
        status.verdict = Verdict(LagState.ERR, str(exc))
        return status
    # What was just read counts as the latest observation (not recorded: only runs and sensors record).
    status.partitions = [
        (
            lag,
            evaluate_partition(
                [*history.get(lag.partition, []), Observation(now, lag.next_offset, lag.latest)],
                now,
                rules,
                last_commit,
            ),
        )
        for lag in lags
    ]
    status.verdict = (
        Verdict(LagState.ERR, f"planning fails: {error}") if error else worst(v for _, v in status.partitions)
    )
    return status


def recent_batches(conn, pipeline: str, limit: int) -> list[BatchSummary]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT committed_at, kind, records_read, rows_written, dead_letters, "
            "extract(epoch FROM committed_at - started_at)::float, note FROM microingest.batches "
            "WHERE pipeline = %s "
            "AND kind <> 'pin' ORDER BY committed_at DESC LIMIT %s",
            (pipeline, limit),
        )
        return [BatchSummary(*row) for row in cur.fetchall()]
