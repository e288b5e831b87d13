"""Plan live runs against the ledger and Kafka (the I/O around plan.offsets.plan_ranges).

A live run reads from the ledger up to the last stable offsets Kafka reports when it is planned, capped by the
pipeline's records per run, and commits that in batches of at most max_records_per_batch.
"""

from __future__ import annotations

import logging

from microingest.batches import Positions, RunInfo, RunPlan
from microingest.commit.ledger import ledger_topic_ids, pin_positions, restart_topic
from microingest.declare.pipeline import Pipeline
from microingest.errors import PlanningError
from microingest.lag import observations as lag_history
from microingest.lag.figures import pipeline_positions
from microingest.plan.offsets import Plan, TopicRecreatedError, plan_ranges
from microingest.systems.kafka_access import KafkaAccessError, topic_id
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import PostgresUnavailableError

log = logging.getLogger(__name__)


def checked_topic_id(pipeline: Pipeline, systems: PipelineSystems, positions: Positions) -> str | None:
    """Kafka's id of the pipeline's topic; TopicRecreatedError when the ledger's positions were committed under
    another id (the topic was deleted and created again under its name)."""
    current = topic_id(systems.kafka_client, pipeline.topic)
    with systems.db() as conn:
        committed = ledger_topic_ids(conn, pipeline.name, pipeline.topic)
    old = sorted(committed - {current}) if current is not None else []
    if old:
        raise TopicRecreatedError(pipeline.name, pipeline.topic, ", ".join(old), str(current), positions.ledger)
    return current


def plan_next_batch(pipeline: Pipeline, run: RunInfo | None = None, record_pins: bool = True) -> Plan:
    """Plan the next batch (at most max_records_per_batch records)."""
    return _plan(pipeline, pipeline.max_records_per_batch, run, record_pins)[0]


def plan_live_run(
    pipeline: Pipeline, run: RunInfo | None = None, max_records: int | None = None, record_pins: bool = True
) -> RunPlan:
    """Plan a live run: everything up to the last stable offsets, at most `max_records` (default: the pipeline's
    max_records_per_run), in batches of max_records_per_batch, within max_run_seconds."""
    plan, topic = _plan(pipeline, max_records or pipeline.max_records_per_run, run, record_pins)
    return RunPlan("ingest", plan.ranges, pipeline.max_records_per_batch, pipeline.max_run_seconds, topic_id=topic)


def _record_planning_failure(pipeline: Pipeline, systems: PipelineSystems, exc: Exception) -> None:
    """Best effort: the lag state shows ERR until a planning succeeds (Postgres may be what is failing)."""
    try:
        with systems.db() as conn, conn:
            lag_history.record_planning(conn, pipeline.name, f"{type(exc).__name__}: {exc}")
    except PostgresUnavailableError:
        log.warning("could not record the planning failure of %s: Postgres unavailable", pipeline.name)


def _observe_topic(
    pipeline: Pipeline, systems: PipelineSystems, run: RunInfo | None, writes: bool
) -> tuple[Positions, str | None]:
    """The positions and Kafka's topic id. A topic made again since the last commit is refused, or with
    on_topic_recreated: restart started over: its old positions forgotten (recorded in the history) when the plan
    may write, else only planned as if forgotten."""
    positions = pipeline_positions(pipeline, systems)
    try:
        return positions, checked_topic_id(pipeline, systems, positions)
    except TopicRecreatedError as exc:
        if pipeline.on_topic_recreated != "restart":
            raise
        if not writes:
            return Positions({}, positions.earliest, positions.latest), exc.new_id
        restart_topic(
            systems.postgres, pipeline.name, pipeline.topic, exc.new_id, pipeline.start_from, run or RunInfo()
        )
        return pipeline_positions(pipeline, systems), exc.new_id


def _plan(pipeline: Pipeline, max_records: int, run: RunInfo | None, record_pins: bool) -> tuple[Plan, str | None]:
    """With record_pins, partitions new to a start_from=latest pipeline get their position recorded in the ledger
    now (that is a write; so is the restart of a recreated topic); without, the plan is only computed."""
    systems = PipelineSystems.of(pipeline)
    try:
        positions, topic = _observe_topic(pipeline, systems, run, record_pins)
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
        pin_positions(systems.postgres, pipeline.name, plan.pins, run or RunInfo(), topic)
        log.info(
            "recorded positions without reading: %s",
            ", ".join(
                f"{r.topic}[{r.partition}]@{r.from_offset}"
                + (f" (past the retention gap [{r.gap[0]}, {r.gap[1]}))" if r.gap else " (a new partition, at latest)")
                for r in plan.pins
            ),
        )
    for r in plan.ranges:
        if r.gap:
            log.warning(
                "retention gap on %s[%d]: offsets [%d, %d) were deleted before ingestion; skipping them "
                "(on_retention_gap: skip), the commit records the gap",
                r.topic,
                r.partition,
                *r.gap,
            )
        log.info("planned %s[%d] [%d, %d): %d records", r.topic, r.partition, r.from_offset, r.until_offset, r.size)
    if not plan.ranges:
        log.info("nothing new on %s for pipeline %s", pipeline.topic, pipeline.name)
    return plan, topic
