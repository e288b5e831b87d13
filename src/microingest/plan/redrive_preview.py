"""A redrive's dry run: the dead letters its plan selected (`redrive.plan_redrive`) decoded here, record by record
with the reference decoder, as the redrive would decode them, to say how many would land and why the others would
not. It writes nothing. Apart from the planner, which needs no decoder: an ingest task imports this one only for a
dry run."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from microingest import settings
from microingest.batches import RunPlan
from microingest.commit.dead_letters import unresolved_page
from microingest.declare.pipeline import Pipeline
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import processed, stored_records_batch
from microingest.systems.pipeline_systems import PipelineSystems

PREVIEWED = 10_000  # dead letters a dry run decodes at most (the first, by position)


@dataclass
class Preview:
    """What a redrive would do with the dead letters a dry run decoded."""

    decoded: int = 0
    landing: int = 0
    failing: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)  # the first reason of each error class
    more: bool = False  # more were selected than PREVIEWED

    def lines(self) -> list[str]:
        head = f"dry run of the first {self.decoded:,}" if self.more else f"dry run of {self.decoded:,}"
        out = [f"{head} dead letter(s): {self.landing:,} would land, {sum(self.failing.values()):,} still fail"]
        out += [f"  {c} {n:,}: e.g. {self.reasons[c]}" for c, n in sorted(self.failing.items())]
        return out


def preview_redrive(pipeline: Pipeline, plan: RunPlan) -> Preview:
    """Decode the plan's dead letters (at most PREVIEWED) as the redrive would, page by page as its job does,
    writing nothing."""
    systems = PipelineSystems.of(pipeline)
    preview = Preview()
    if not plan.ranges or plan.redrive is None:
        return preview
    processor = RecordProcessor(pipeline, systems.registry)
    after, max_bytes = None, settings.redrive_page_bytes()
    while True:
        wanted = min(plan.batch_cap, PREVIEWED - preview.decoded)
        with systems.db() as conn, conn.cursor() as cur:
            records = unresolved_page(
                cur, pipeline.name, plan.ranges, plan.redrive, after, max(wanted, 1), max_bytes if wanted else 1
            )
        if not records:
            return preview
        if not wanted:
            preview.more = True
            return preview
        for _, verdict in processed(stored_records_batch(records), processor):
            preview.decoded += 1
            if isinstance(verdict, BadRecord):
                preview.failing[verdict.error_class] += 1
                preview.reasons.setdefault(verdict.error_class, str(verdict))
            else:
                preview.landing += 1
        after = (records[-1].topic, records[-1].partition, records[-1].offset)
