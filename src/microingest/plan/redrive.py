"""Plan a redrive: the pipeline's unresolved dead letters decoded again, once their cause is fixed (a declaration, a
transform, a schema registered late), with the declaration, transform and registry as they are now.

The plan names the dead letters' partitions, the span of offsets they lie in and which of them to take (one error
class, those written since a time); the run's job reads them from microingest.dead_letters page by page and commits
each page as a batch of kind `redrive` (`spark.redrive`, `commit.redrive`). Kafka is not read: a dead letter keeps
its record whole, so one whose offsets retention has deleted is redriven all the same.

A dry run's look at what would land is `redrive_preview`'s.
"""

from __future__ import annotations

from collections import Counter

from microingest.batches import OffsetRange, RunPlan
from microingest.commit.dead_letters import UnresolvedGroup, unresolved_groups
from microingest.declare.pipeline import Pipeline
from microingest.plan.offsets import RequestError
from microingest.plan.request import REDRIVE, TOPIC, RedriveRequest
from microingest.systems.pipeline_systems import PipelineSystems

_END = 2**63 - 1  # past any Kafka offset


def plan_redrive(pipeline: Pipeline, request: RedriveRequest, who: str) -> tuple[RunPlan, list[UnresolvedGroup]]:
    """The redrive's run plan (its ranges empty when no dead letter is selected) and the selected dead letters by
    partition and error class."""
    if pipeline.redrive_refusal is not None:
        raise RequestError(REDRIVE, pipeline.redrive_refusal)
    systems = PipelineSystems.of(pipeline)
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT topic, partition FROM microingest.dead_letters WHERE pipeline = %s AND "
            "resolved_by IS NULL ORDER BY 1, 2",
            (pipeline.name,),
        )
        held = [(t, p) for t, p in cur.fetchall() if pipeline.reads_topic(t)]
    if request.topic is not None and not pipeline.reads_topic(request.topic):
        raise RequestError(TOPIC, f"pipeline {pipeline.name} does not read {request.topic} ({pipeline.sources_named})")
    # A partition names one topic's: the one asked for, or the only one there is.
    candidates = sorted({t for t, _ in held} | ({*pipeline.topics} if pipeline.topic_pattern is None else set()))
    topic = request.topic or (candidates[0] if len(candidates) == 1 else None)
    if request.partition is not None and topic is None:
        which = ", ".join(candidates) or "its topics"
        raise RequestError(TOPIC, f"a partition belongs to one topic: say which of {which}")
    if request.partition is None:
        asked = [OffsetRange(t, p, 0, _END, None) for t, p in held if topic is None or t == topic]
    else:
        lo, hi = request.offsets or (0, _END)
        asked = [OffsetRange(str(topic), request.partition, lo, hi, None)]
    with systems.db() as conn, conn.cursor() as cur:
        groups = unresolved_groups(cur, pipeline.name, asked, request.selection) if asked else []
    spans: dict[tuple[str, int], tuple[int, int]] = {}
    for g in groups:
        if g.withheld:
            continue
        lo, hi = spans.get((g.topic, g.partition), (g.first, g.last + 1))
        spans[(g.topic, g.partition)] = (min(lo, g.first), max(hi, g.last + 1))
    ranges = tuple(OffsetRange(t, p, lo, hi, None) for (t, p), (lo, hi) in sorted(spans.items()))
    note = f"redriven by {who} ({request.selection.describe()})"
    plan = RunPlan("redrive", ranges, pipeline.max_records_per_batch, note=note, redrive=request.selection)
    return plan, groups


def redrive_summary(plan: RunPlan, groups: list[UnresolvedGroup]) -> str:
    """What the redrive will take, for the plan's log, its XCom and `microingest redrive`."""
    withheld = sum(g.records for g in groups if g.withheld)
    left = (
        f"; {withheld:,} withheld dead letter(s) left as they are: a masked pipeline kept no record to decode, a "
        "backfill over their positions reads them again from Kafka"
        if withheld
        else ""
    )
    total = sum(g.records for g in groups if not g.withheld)
    if not total:
        selected = plan.redrive.describe() if plan.redrive else ""
        return f"redrive: no unresolved dead letter is selected ({selected}){left}"
    by_class = Counter[str]()
    for g in groups:
        if not g.withheld:
            by_class[g.error_class] += g.records
    classes = ", ".join(f"{c} {n:,}" for c, n in sorted(by_class.items()))
    return (
        f"redrive of {total:,} dead letter(s) in {', '.join(map(str, plan.ranges))} ({classes}), in batches of at "
        f"most {plan.batch_cap:,}; {plan.note}{left}"
    )
