"""Plan backfill runs: requested offset ranges, or a time window turned into offsets by Kafka's offsets-for-times
look-up, checked against what Kafka retains and kept below the live pipeline's position (see
plan.offsets.backfill_ranges).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from microingest.batches import OffsetRange, RunPlan
from microingest.commit.overlap import check_overlap
from microingest.commit.sinks import sink_for
from microingest.declare.pipeline import Pipeline
from microingest.lag.figures import pipeline_positions
from microingest.plan.live import checked_topic_id
from microingest.plan.offsets import backfill_ranges
from microingest.plan.request import RunRequest
from microingest.systems.kafka_access import offsets_at
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)


def epoch_ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def window_offsets(
    pipeline: Pipeline, systems: PipelineSystems, window: tuple[datetime, datetime], latest: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """[from, until) per partition: from the first record timestamped at or after the window's start (none before
    it is) to the first timestamped at or after its end. A record timestamped inside the window but written after
    that one (a late producer) lies beyond; records inside the span but timestamped outside the window are filtered
    out when read (RunPlan.time_window_ms)."""
    start, end = (offsets_at(systems.kafka_client, pipeline.topic, epoch_ms(t)) for t in window)
    out = {}
    for p, high in latest.items():
        first, after = start.get(p), end.get(p)
        lo = high if first is None else min(first, high)
        hi = high if after is None else min(after, high)
        out[p] = (lo, max(lo, hi))
    return out


def plan_backfill(pipeline: Pipeline, request: RunRequest) -> RunPlan:
    """The backfill's run plan; fails (RequestError, OverlapError) before anything is written."""
    systems = PipelineSystems.of(pipeline)
    positions = pipeline_positions(pipeline, systems)
    topic = checked_topic_id(pipeline, systems, positions)  # a recreated topic: the live run's to restart, first
    if request.window is not None:
        requested = window_offsets(pipeline, systems, request.window, positions.latest)
        window_ranges = (OffsetRange(pipeline.topic, p, lo, hi, None) for p, (lo, hi) in sorted(requested.items()))
        log.info(
            "time window [%s, %s) is offsets %s",
            request.window[0].isoformat(),
            request.window[1].isoformat(),
            ", ".join(map(str, window_ranges)),
        )
    else:
        requested = request.offsets or {}
    ranges, notes = backfill_ranges(
        pipeline.topic, requested, positions, request.field, clip_to_live=request.window is not None
    )
    for note in notes:
        log.info(note)
    # Aggregates count each position once, and the history marks a batch's whole ranges as counted: a record the
    # filter left out could never be counted afterwards. Their windows replay the whole span, as they always did.
    filtered = request.window is not None and pipeline.sink_mode != "aggregate"
    window_ms = (epoch_ms(request.window[0]), epoch_ms(request.window[1])) if filtered and request.window else None
    plan = RunPlan("backfill", ranges, pipeline.max_records_per_batch, None, request.overlap, window_ms, topic)
    if ranges:
        # Fail at once on overlap the policy refuses; each batch's commit checks again, under the pipeline lock.
        with systems.db() as conn, conn.cursor() as cur:
            check_overlap(cur, sink_for(pipeline), ranges, request.overlap)
    return plan
