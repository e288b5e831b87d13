"""Plan live runs against the ledger and Kafka (the I/O around plan.offsets.plan_ranges).

A live run reads from the ledger up to the last stable offsets Kafka reports when it is planned, capped by the
pipeline's records per run, and commits that in batches of at most max_records_per_batch.
"""

from __future__ import annotations

import logging

from microingest.batches import OffsetRange, RunInfo, RunPlan, Sources
from microingest.commit.ledger import ledger_topic_ids, pin_positions, record_new_topic, record_waiting
from microingest.commit.restart import restart_topic
from microingest.declare.pipeline import Pipeline
from microingest.errors import PlanningError
from microingest.lag import observations as lag_history
from microingest.lag.sources import pipeline_sources
from microingest.plan.offsets import Plan, TopicRecreatedError, plan_ranges
from microingest.systems.kafka_access import KafkaAccessError
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import PostgresUnavailableError

log = logging.getLogger(__name__)


def checked_topic_ids(
    pipeline: Pipeline, sources: Sources, systems: PipelineSystems, forgotten: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Kafka's id of each topic the pipeline reads; TopicRecreatedError when the ledger's positions on one were
    committed under another id (the topic was deleted and created again under its name), unless the plan already
    treats that topic's positions as `forgotten`."""
    current = sources.topic_ids
    with systems.db() as conn:
        committed = ledger_topic_ids(conn, pipeline.name, sources.topics)
    for topic in sources.topics:
        old = sorted(committed.get(topic, set()) - {current[topic]}) if topic in current else []
        if topic in forgotten:
            continue
        if old:
            raise TopicRecreatedError(
                pipeline.name, topic, ", ".join(old), current[topic], sources.positions[topic].ledger
            )
    return dict(current)


def plan_next_batch(pipeline: Pipeline, run: RunInfo | None = None, record_pins: bool = True) -> Plan:
    """Plan the next batch (at most max_records_per_batch records)."""
    return _plan(pipeline, pipeline.max_records_per_batch, run, record_pins)[0]


def plan_live_run(
    pipeline: Pipeline, run: RunInfo | None = None, max_records: int | None = None, record_pins: bool = True
) -> RunPlan:
    """Plan a live run: everything up to the last stable offsets, at most `max_records` (default: the pipeline's
    max_records_per_run), in batches of max_records_per_batch, within max_run_seconds."""
    plan, ids = _plan(pipeline, max_records or pipeline.max_records_per_run, run, record_pins)
    return RunPlan("ingest", plan.ranges, pipeline.max_records_per_batch, pipeline.max_run_seconds, topic_ids=ids)


def joined_from(pipeline: Pipeline, sources: Sources, topic: str | None = None) -> str | None:
    """Where a topic without positions begins once the pipeline holds positions on others (but `topic`), or was
    planned while its pattern matched nothing: one that came to match its pattern holds nothing older than the
    pipeline, so it is read from 'earliest', as a partition added to a topic is. None: start_from decides (the
    pipeline's first topics, and those added to `topics:` by hand)."""
    joins = bool(sources.held - {topic}) or sources.waited
    return "earliest" if pipeline.topic_pattern is not None and joins else None


def _record_new_topics(
    pipeline: Pipeline, sources: Sources, systems: PipelineSystems, run: RunInfo, restarted: frozenset[str]
) -> None:
    """A topic the pipeline starts reading after its first (one that came to match its pattern, or was added to its
    list) is recorded in the history, once, with where it is read from. A topic restarted by this plan has its
    restart in the history instead."""
    if not sources.held and not sources.waited:
        return  # the pipeline's first topics: its first batches say where they started
    begins = joined_from(pipeline, sources)
    for topic, positions in sources.positions.items():
        if positions.ledger or topic in restarted:
            continue
        if begins is not None:
            why = f"matches topic_pattern '{pipeline.topic_pattern}' and joins the pipeline: read from its earliest "
            why += "offsets (a topic that comes to match holds nothing older than the pipeline)"
        else:
            why = f"is declared and joins the pipeline: read from its {pipeline.start_from} offsets (start_from)"
        starts = positions.earliest if (begins or pipeline.start_from) == "earliest" else positions.latest
        note = f"topic {topic} {why}"
        ranges = [OffsetRange(topic, p, o, o, None) for p, o in sorted(starts.items())]
        if record_new_topic(systems.postgres, pipeline.name, ranges, run, note):
            log.info(note)


def _record_planning_failure(pipeline: Pipeline, systems: PipelineSystems, exc: Exception) -> None:
    """Best effort: the lag state shows ERR until a planning succeeds (Postgres may be what is failing)."""
    try:
        with systems.db() as conn, conn:
            lag_history.record_planning(conn, pipeline.name, f"{type(exc).__name__}: {exc}")
    except PostgresUnavailableError:
        log.warning("could not record the planning failure of %s: Postgres unavailable", pipeline.name)


def _observe_sources(
    pipeline: Pipeline, systems: PipelineSystems, run: RunInfo | None, writes: bool
) -> tuple[Sources, dict[str, str], frozenset[str]]:
    """The positions on each topic, Kafka's topic ids and the topics restarted. A topic made again since the last
    commit is refused, or with on_topic_recreated: restart started over: its old positions forgotten (recorded in
    the history) when the plan may write, else only planned as if forgotten."""
    sources = pipeline_sources(pipeline, systems)
    forgotten: frozenset[str] = frozenset()
    while True:
        try:
            return sources, checked_topic_ids(pipeline, sources, systems, forgotten), forgotten
        except TopicRecreatedError as exc:
            if pipeline.on_topic_recreated != "restart" or exc.topic in forgotten:
                raise
            forgotten |= {exc.topic}
            begins = joined_from(pipeline, sources, exc.topic) or pipeline.start_from
            if writes:
                restart_topic(systems.postgres, pipeline, exc.topic, exc.new_id, begins, run or RunInfo())
                sources = pipeline_sources(pipeline, systems)
            else:
                old = sources.positions[exc.topic]
                sources = sources._replace(
                    positions={**sources.positions, exc.topic: old._replace(ledger={})},
                    held=sources.held - {exc.topic},
                )


def _plan(pipeline: Pipeline, max_records: int, run: RunInfo | None, record_pins: bool) -> tuple[Plan, dict[str, str]]:
    """With record_pins, partitions new to a start_from=latest pipeline get their position recorded in the ledger
    now (that is a write; so is the restart of a recreated topic); without, the plan is only computed."""
    systems = PipelineSystems.of(pipeline)
    try:
        sources, ids, restarted = _observe_sources(pipeline, systems, run, record_pins)
        begins = joined_from(pipeline, sources)
        plan = plan_ranges(sources.positions, max_records, pipeline.start_from, pipeline.on_retention_gap, begins)
    except (KafkaAccessError, PlanningError) as exc:
        if record_pins:
            _record_planning_failure(pipeline, systems, exc)
        raise
    if pipeline.topic_pattern is not None and not sources.topics:
        log.warning(
            "pipeline %s: topic_pattern '%s' matches no topic Kafka lists", pipeline.name, pipeline.topic_pattern
        )
        if record_pins and not sources.held and not sources.waited:
            note = (
                f"topic_pattern '{pipeline.topic_pattern}' matches no topic yet: every topic that comes to match "
                "joins the pipeline and is read from its earliest offsets"
            )
            if record_waiting(systems.postgres, pipeline.name, run or RunInfo(), note):
                log.info(note)
    for topic in sources.gone:
        log.warning(
            "topic %s matches pipeline %s's topic_pattern and the ledger holds positions on it, but Kafka no longer "
            "lists it: nothing is read from it, its positions are kept",
            topic,
            pipeline.name,
        )
    if record_pins:  # a run's planning, not a look: it feeds the lag history
        with systems.db() as conn, conn:
            lag_history.record_sources(conn, pipeline.name, sources, "plan")
            lag_history.record_planning(conn, pipeline.name, None)
        _record_new_topics(pipeline, sources, systems, run or RunInfo(), restarted)
    if plan.pins and record_pins:
        pin_positions(systems.postgres, pipeline.name, plan.pins, run or RunInfo(), ids)
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
        log.info("nothing new on %s for pipeline %s", pipeline.sources_named, pipeline.name)
    return plan, ids
