"""Plan live runs against the ledger and Kafka (the I/O around planning.plan_ranges).

A live run reads from the ledger up to the last stable offsets Kafka reports when it is planned, capped by the
pipeline's records per run, and commits that in batches of at most max_records_per_batch.
"""

from __future__ import annotations

import logging

from microingest.commit.history import RunInfo
from microingest.commit.ledger import pin_positions, read_ledger
from microingest.declare.pipeline import Pipeline
from microingest.lag import observations as lag_history
from microingest.plan.offsets import Plan, PlanningError, Positions, RunPlan, plan_ranges
from microingest.systems.kafka_access import KafkaAccessError, partition_bounds
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import PostgresUnavailableError

log = logging.getLogger(__name__)


def observe(pipeline: Pipeline, systems: PipelineSystems) -> Positions:
    """Where the pipeline is (its ledger), and what Kafka holds."""
    with systems.db() as conn:
        ledger = read_ledger(conn, pipeline.name, pipeline.topic)
    earliest, latest = partition_bounds(systems.kafka_client, pipeline.topic)
    return Positions(ledger, earliest, latest)


def plan_next_batch(pipeline: Pipeline, run: RunInfo | None = None, record_pins: bool = True) -> Plan:
    """Plan the next batch (at most max_records_per_batch records)."""
    return _plan(pipeline, pipeline.max_records_per_batch, run, record_pins)


def plan_live_run(pipeline: Pipeline, run: RunInfo | None = None, max_records: int | None = None,
                  record_pins: bool = True) -> RunPlan:
    """Plan a live run: everything up to the last stable offsets, at most `max_records` (default: the pipeline's
    max_records_per_run), in batches of max_records_per_batch, within max_run_seconds."""
    plan = _plan(pipeline, max_records or pipeline.max_records_per_run, run, record_pins)
    return RunPlan("ingest", plan.ranges, pipeline.max_records_per_batch, pipeline.max_run_seconds)


def _record_planning_failure(pipeline: Pipeline, systems: PipelineSystems, exc: Exception) -> None:
    """Best effort: the lag state shows ERR until a planning succeeds (Postgres may be what is failing)."""
    try:
        with systems.db() as conn, conn:
            lag_history.record_planning(conn, pipeline.name, f"{type(exc).__name__}: {exc}")
    except PostgresUnavailableError:
        log.warning("could not record the planning failure of %s: Postgres unavailable", pipeline.name)


def _plan(pipeline: Pipeline, max_records: int, run: RunInfo | None, record_pins: bool) -> Plan:
    """With record_pins, partitions new to a start_from=latest pipeline get their position recorded in the ledger
    now (that is a write); without, the plan is only computed."""
    systems = PipelineSystems.of(pipeline)
    try:
        positions = observe(pipeline, systems)
        plan = plan_ranges(pipeline.topic, positions, max_records, pipeline.start_from, pipeline.on_retention_gap)
    except (KafkaAccessError, PlanningError) as exc:
        if record_pins:
            _record_planning_failure(pipeline, systems, exc)
        raise
    if record_pins:  # a run's planning, not a look: it feeds the lag history
        with systems.db() as conn, conn:
            lag_history.record(conn, pipeline.name, positions.ledger, positions.latest, "plan")
            lag_history.record_planning(conn, pipeline.name, None)
    if plan.pins and record_pins:
        pin_positions(systems.postgres, pipeline.name, plan.pins, run or RunInfo())
        log.info("recorded start positions (latest) of new partitions: %s",
                 ", ".join(f"{r.topic}[{r.partition}]@{r.from_offset}" for r in plan.pins))
    for r in plan.ranges:
        if r.gap:
            log.warning("retention gap on %s[%d]: offsets [%d, %d) were deleted before ingestion; skipping them "
                        "(on_retention_gap: skip), the commit records the gap", r.topic, r.partition, *r.gap)
        log.info("planned %s[%d] [%d, %d): %d records", r.topic, r.partition, r.from_offset, r.until_offset, r.size)
    if not plan.ranges:
        log.info("nothing new on %s for pipeline %s", pipeline.topic, pipeline.name)
    return plan
