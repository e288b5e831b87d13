"""Plan the next batch of a pipeline against the live ledger and Kafka (the I/O around planning.plan_ranges)."""

from __future__ import annotations

import logging

from microingest.connections import get_connection, kafka_python_config, postgres_params
from microingest.declarations import Pipeline
from microingest.kafka_access import partition_bounds
from microingest.ledger import RunInfo, connection, pin_positions, read_ledger
from microingest.planning import Plan, plan_ranges

log = logging.getLogger(__name__)


def observe(pipeline: Pipeline) -> tuple[dict[int, int], dict[int, int], dict[int, int]]:
    """(ledger, earliest, latest) per partition: where the pipeline is, and what Kafka holds."""
    with connection(postgres_params(get_connection(pipeline.postgres_conn_id))) as conn:
        ledger = read_ledger(conn, pipeline.name, pipeline.topic)
    earliest, latest = partition_bounds(kafka_python_config(get_connection(pipeline.kafka_conn_id)), pipeline.topic)
    return ledger, earliest, latest


def plan_next_batch(pipeline: Pipeline, run: RunInfo | None = None, record_pins: bool = True) -> Plan:
    """Plan the next batch. With record_pins, partitions new to a start_from=latest pipeline get their position
    recorded in the ledger now (that is a write); without, the plan is only computed."""
    ledger, earliest, latest = observe(pipeline)
    plan = plan_ranges(pipeline.topic, ledger, earliest, latest, pipeline.max_records_per_batch, pipeline.start_from,
                       pipeline.on_retention_gap)
    if plan.pins and record_pins:
        pg = postgres_params(get_connection(pipeline.postgres_conn_id))
        pin_positions(pg, pipeline.name, plan.pins, run or RunInfo())
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
