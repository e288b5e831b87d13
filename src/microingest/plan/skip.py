"""Plan a skip, the escape hatch for a partition that no retry gets past: its live position moved forward by hand.

When a batch is refused for a reason that repeats on every retry (a dead-letter guard tripped by a broken producer, a
target constraint its rows violate), a skip moves one partition's ledger from its position to `until`. It runs as a
batch of its own kind on Spark: the records are read by the same Kafka source as every live batch and each is kept
whole (key, value, headers, timestamp) as a dead letter with error_class `skipped` and the operator's reason, in the
transaction that advances the ledger and writes a history batch of kind `skip` saying who skipped what and why.
Nothing vanishes, and a record only the JVM's Kafka client reads (a header name that is not UTF-8) is passed like
any other. A live run planned before the skip is fenced at its commit; a later backfill over skipped positions
resolves them (`commit.overlap`): each becomes a row or a dead letter of its own.
"""

from __future__ import annotations

from microingest.batches import RunPlan
from microingest.commit.sinks import SKIPPED
from microingest.declare.pipeline import Pipeline
from microingest.lag.sources import pipeline_sources
from microingest.plan.backfill import requested_topics
from microingest.plan.live import checked_topic_ids
from microingest.plan.offsets import skip_range
from microingest.plan.request import SKIP_PARTITION, SkipRequest
from microingest.systems.pipeline_systems import PipelineSystems


def plan_skip(pipeline: Pipeline, request: SkipRequest, who: str) -> RunPlan:
    """The skip's run plan: one batch over the partition's range, unless the driver cannot hold it decoded (the
    run then splits it, as any batch). RequestError, with nothing written, when the request makes no sense against
    the ledger and Kafka."""
    systems = PipelineSystems.of(pipeline)
    sources = pipeline_sources(pipeline, systems)
    ids = checked_topic_ids(pipeline, sources, systems)
    [topic] = requested_topics(pipeline, sources, request.topic, SKIP_PARTITION)
    skipped = skip_range(topic, request.partition, request.until, sources.positions[topic], pipeline.start_from)
    return RunPlan("skip", (skipped,), max(1, skipped.size), topic_ids=ids, note=f"skipped by {who}: {request.reason}")


def skip_summary(plan: RunPlan) -> str:
    """What the skip will do, for the plan's log, its XCom and `microingest skip`."""
    [r] = plan.ranges
    lost = f"; offsets [{r.gap[0]}, {r.gap[1]}) were already deleted by retention (recorded as a gap)" if r.gap else ""
    return (
        f"skip of {r} ({r.size} offsets): the live position moves to {r.until_offset}, the records kept as dead "
        f'letters ({SKIPPED}, "{plan.note}"){lost}'
    )
