"""Plan the next batch of a pipeline against the live ledger and Kafka (the I/O around planning.plan_ranges)."""

from __future__ import annotations

import logging

from microingest.connections import get_connection, kafka_python_config, postgres_params
from microingest.declarations import Pipeline
from microingest.kafka_access import partition_bounds
from microingest.ledger import RunInfo, connection, pin_positions, read_ledger
from microingest.planning import Plan, plan_ranges

log = logging.getLogger(__name__)


def plan_next_batch(pipeline: Pipeline, run: RunInfo | None = None) -> Plan:
    pg = postgres_params(get_connection(pipeline.postgres_conn_id))
    with connection(pg) as conn:
        ledger = read_ledger(conn, pipeline.name, pipeline.topic)
    earliest, latest = partition_bounds(kafka_python_config(get_connection(pipeline.kafka_conn_id)), pipeline.topic)
    plan = plan_ranges(pipeline.topic, ledger, earliest, latest, pipeline.max_records_per_batch, pipeline.start_from)
    if plan.pins:
        pin_positions(pg, pipeline.name, plan.pins, run or RunInfo())
        log.info("recorded start positions (latest) of new partitions: %s",
                 ", ".join(f"{r.topic}[{r.partition}]@{r.from_offset}" for r in plan.pins))
    for r in plan.ranges:
        log.info("planned %s[%d] [%d, %d): %d records", r.topic, r.partition, r.from_offset, r.until_offset, r.size)
    if not plan.ranges:
        log.info("nothing new on %s for pipeline %s", pipeline.topic, pipeline.name)
    return plan
