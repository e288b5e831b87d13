"""A pipeline's lag status, as the CLI, the lag page and the lag sensors show it: its state and why, per-partition
offset and time lag with their own states, the time left before retention deletes unread records (AT_RISK when
shorter than the declared margin), and its last batches."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from microingest.batches import PartitionId
from microingest.declare.pipeline import Pipeline
from microingest.lag import observations as lag_history
from microingest.lag.figures import PartitionLag, partition_lags
from microingest.lag.retention import Horizon, growth_per_second, horizon
from microingest.lag.sources import pipeline_sources
from microingest.lag.states import (
    MIN_WINDOW,
    LagState,
    Observation,
    Rules,
    Verdict,
    default_window,
    evaluate_partition,
    worst,
)
from microingest.systems.kafka_access import KafkaAccessError
from microingest.systems.kafka_retention import partition_sizes, retention_limits
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)

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
    sources: str  # its topics as a message names them (Pipeline.sources_named)
    verdict: Verdict
    window: timedelta
    last_commit: datetime | None = None
    partitions: list[tuple[PartitionLag, Verdict]] = field(default_factory=list)
    batches: list[BatchSummary] = field(default_factory=list)
    retention: dict[PartitionId, Horizon] = field(default_factory=dict)  # none when unread records are safe
    retention_margin: int | None = None  # seconds, as declared (lag.retention_margin)
    gone: tuple[str, ...] = ()  # matched topics Kafka no longer lists, their positions kept in the ledger

    @property
    def topics(self) -> list[str]:
        return sorted({lag.topic for lag, _ in self.partitions})

    @property
    def at_risk(self) -> list[tuple[PartitionId, Horizon]]:
        """The partitions whose unread records retention deletes sooner than the margin, soonest first."""
        risky = [(p, h) for p, h in self.retention.items() if h.at_risk(self.retention_margin)]
        return sorted(risky, key=lambda ph: ph[1].seconds or 0.0)

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
            "topics": self.topics,
            "gone_topics": list(self.gone),
            "state": self.verdict.state.name,
            "reason": self.verdict.reason,
            "window_seconds": seconds(self.window),
            "last_commit": self.last_commit.isoformat() if self.last_commit else None,
            "offset_lag": self.offset_lag,
            "time_lag_seconds": seconds(self.time_lag),
            "at_risk": bool(self.at_risk),
            "retention_margin_seconds": self.retention_margin,
            "partitions": [
                {
                    "topic": p.topic,
                    "partition": p.partition,
                    "position": p.position,
                    "last_stable_offset": p.latest,
                    "offset_lag": p.lag,
                    "time_lag_seconds": seconds(p.time_lag),
                    "time_lag_source": p.time_source or None,
                    "state": v.state.name,
                    "reason": v.reason,
                    "retention_horizon_seconds": _rounded(self.retention.get(p.key, Horizon()).seconds),
                    "retention_bytes_left": self.retention.get(p.key, Horizon()).bytes_left,
                    "at_risk": self.retention.get(p.key, Horizon()).at_risk(self.retention_margin),
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


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def window_of(pipeline: Pipeline) -> timedelta:
    """The state window: as declared (`lag.window_seconds`), else from the schedule and the gate's wait."""
    policy = pipeline.lag
    if policy.window_seconds:
        return timedelta(seconds=policy.window_seconds)
    if pipeline.woken_by_records:  # a run at least every max_wait_seconds while records wait
        return max(MIN_WINDOW, 3 * timedelta(seconds=pipeline.on_records.max_wait_seconds))
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
        pipeline.name,
        pipeline.sources_named,
        Verdict(LagState.OK, ""),
        rules.window,
        last_commit,
        batches=batches,
        retention_margin=pipeline.lag.retention_margin_seconds,
    )
    try:
        points = {key: [(o.at, o.end) for o in obs] for key, obs in history.items()}
        sources = pipeline_sources(pipeline, systems)
        lags = partition_lags(pipeline, systems, now, points, fetch_records, sources)
    except KafkaAccessError as exc:
        status.verdict = Verdict(LagState.ERR, str(exc))
        return status
    # What was just read counts as the latest observation (not recorded: only runs and sensors record).
    status.partitions = [
        (
            lag,
            evaluate_partition(
                [*history.get(lag.key, []), Observation(now, lag.next_offset, lag.latest)],
                now,
                rules,
                last_commit,
            ),
        )
        for lag in lags
    ]
    status.gone = sources.gone
    status.verdict = (
        Verdict(LagState.ERR, f"planning fails: {error}") if error else worst(v for _, v in status.partitions)
    )
    if not error and pipeline.topic_pattern is not None and not sources.topics:
        status.verdict = Verdict(
            LagState.WARN, f"topic_pattern '{pipeline.topic_pattern}' matches no topic Kafka lists"
        )
    for lag in lags:
        points.setdefault(lag.key, []).append((now, lag.latest))
    status.retention = retention_horizons(pipeline, systems, lags, points)
    return status


def retention_horizons(
    pipeline: Pipeline, systems, lags: list[PartitionLag], points: dict[PartitionId, list[tuple[datetime, int]]]
) -> dict[PartitionId, Horizon]:
    """Each waiting partition's horizon; none when no record waits, or when Kafka does not say its topic's retention
    (a user without DescribeConfigs): the rest of the status stands without them."""
    horizons = {}
    for topic in sorted({lag.topic for lag in lags if lag.lag}):
        try:
            limits = retention_limits(systems.kafka_client, topic)
            sizes = partition_sizes(systems.kafka_client, topic) if limits.bytes is not None else {}
        except KafkaAccessError as exc:
            log.warning("pipeline %s: retention horizon of %s unknown: %s", pipeline.name, topic, exc)
            continue
        for lag in lags:
            if lag.lag and lag.topic == topic:
                growth = growth_per_second(points.get(lag.key, []))
                horizons[lag.key] = horizon(lag, limits, sizes.get(lag.partition), growth)
    return horizons


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
