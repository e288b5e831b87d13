"""Plan backfill runs: requested offset ranges, or a time window turned into offsets by Kafka's offsets-for-times
look-up, checked against what Kafka retains and kept below the live pipeline's position (see
plan.offsets.backfill_ranges).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime

from microingest.batches import OffsetRange, RunPlan, Sources
from microingest.commit.overlap import check_overlap
from microingest.commit.sinks import sink_for
from microingest.declare.pipeline import Pipeline
from microingest.lag.sources import pipeline_sources
from microingest.plan.live import checked_topic_ids
from microingest.plan.offsets import RequestError, backfill_ranges
from microingest.plan.request import TOPIC, RunRequest
from microingest.systems.kafka_access import offsets_at
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)


def epoch_ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


def window_offsets(
    systems: PipelineSystems, topic: str, window: tuple[datetime, datetime], latest: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """[from, until) per partition of `topic`: from the first record timestamped at or after the window's start (none
    before it is) to the first timestamped at or after its end. A record timestamped inside the window but written
    after that one (a late producer) lies beyond; records inside the span but timestamped outside the window are
    filtered out when read (RunPlan.time_window_ms)."""
    start, end = (offsets_at(systems.kafka_client, topic, epoch_ms(t)) for t in window)
    out = {}
    for p, high in latest.items():
        first, after = start.get(p), end.get(p)
        lo = high if first is None else min(first, high)
        hi = high if after is None else min(after, high)
        out[p] = (lo, max(lo, hi))
    return out


def requested_topics(
    pipeline: Pipeline, sources: Sources, topic: str | None, field: str, all_unless_named: bool = False
) -> tuple[str, ...]:
    """The topics a backfill or skip takes: the one asked for, else the only one the pipeline reads (a backfill by
    time, `all_unless_named`: every one). RequestError when the request names a topic the pipeline does not read, or
    needs one and names none."""
    if topic is not None:
        if topic not in sources.positions:
            raise RequestError(
                TOPIC, f"pipeline {pipeline.name} reads {', '.join(sources.topics) or 'no topic'}, not {topic}"
            )
        return (topic,)
    if len(sources.topics) != 1 and not all_unless_named:
        raise RequestError(
            TOPIC, f"{field} names partitions of one topic: say which of {', '.join(sources.topics) or 'none'}"
        )
    return sources.topics


def plan_backfill(pipeline: Pipeline, request: RunRequest) -> RunPlan:
    """The backfill's run plan; fails (RequestError, OverlapError) before anything is written."""
    systems = PipelineSystems.of(pipeline)
    sources = pipeline_sources(pipeline, systems)
    ids = checked_topic_ids(pipeline, sources, systems)  # a recreated topic: the live run's to restart, first
    ranges: tuple[OffsetRange, ...] = ()
    by_time = request.window is not None
    for topic in requested_topics(pipeline, sources, request.topic, request.field, all_unless_named=by_time):
        positions = sources.positions[topic]
        if request.window is not None:
            requested = window_offsets(systems, topic, request.window, positions.latest)
            window_ranges = (OffsetRange(topic, p, lo, hi, None) for p, (lo, hi) in sorted(requested.items()))
            log.info(
                "time window [%s, %s) is offsets %s",
                request.window[0].isoformat(),
                request.window[1].isoformat(),
                ", ".join(map(str, window_ranges)),
            )
        else:
            requested = request.offsets or {}
        found, notes = backfill_ranges(
            topic, requested, positions, request.field, clip_to_live=request.window is not None
        )
        ranges += found
        for note in notes:
            log.info(note)
    # Aggregates count each position once, and the history marks a batch's whole ranges as counted: a record the
    # filter left out could never be counted afterwards. Their windows replay the whole span, as they always did.
    filtered = request.window is not None and pipeline.sink_mode != "aggregate"
    window_ms = (epoch_ms(request.window[0]), epoch_ms(request.window[1])) if filtered and request.window else None
    plan = RunPlan("backfill", ranges, pipeline.max_records_per_batch, None, request.overlap, window_ms, ids)
    if ranges:
        # Fail at once on overlap the policy refuses; each batch's commit checks again, under the pipeline lock.
        with systems.db() as conn, conn.cursor() as cur:
            check_overlap(cur, sink_for(pipeline), ranges, request.overlap)
    return plan
