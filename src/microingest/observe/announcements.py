"""The Asset event announcing a run's committed batches: what its extra says, and which batches it still owes.

A consumer acts on the extra alone: which batches landed (`batch_ids`, the target's `batch_id` column), which source
positions they hold (`ranges`, half-open per partition, merged across batches), how many rows and dead letters, and
when. The announcing task reads back the events its run already emitted, so a retry or a cleared run announces only
batches nobody announced before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby

from microingest.batches import CommittedBatch, OffsetRange


def announced_batch_ids(extras: Iterable[Mapping | None]) -> set[str]:
    """Batch ids named by earlier events (their extras); events of other producers name none."""
    ids: set[str] = set()
    for extra in extras:
        batch_ids = (extra or {}).get("batch_ids")
        if isinstance(batch_ids, list):
            ids.update(str(b) for b in batch_ids)
    return ids


def unannounced(batches: Sequence[CommittedBatch], announced: set[str]) -> list[CommittedBatch]:
    """The batches to announce: not yet announced, and not a skip's (it changes nothing in the target)."""
    return [b for b in batches if b.batch_id not in announced and b.kind != "skip"]


def announcement(pipeline: str, dag_id: str, run_id: str, batches: Sequence[CommittedBatch]) -> dict:
    """The extra of one event for `batches` (committed by one run, so of one kind)."""
    if not batches:
        raise ValueError("an announcement needs at least one committed batch")
    kinds = {b.kind for b in batches}
    if len(kinds) != 1:
        raise ValueError(f"one run's batches are of one kind, got {sorted(kinds)}")
    return {
        "pipeline": pipeline,
        "dag_id": dag_id,
        "run_id": run_id,
        "kind": "live" if kinds == {"ingest"} else kinds.pop(),  # or backfill, redrive
        "batch_ids": [b.batch_id for b in batches],
        "ranges": merged_ranges(r for b in batches for r in b.ranges),
        "records_read": sum(b.records_read for b in batches),
        "rows_written": sum(b.rows_written for b in batches),
        "dead_letters": sum(b.dead_letters for b in batches),
        "first_committed_at": min(b.committed_at for b in batches).isoformat(),
        "committed_at": max(b.committed_at for b in batches).isoformat(),
    }


def merged_ranges(ranges: Iterable[OffsetRange]) -> list[dict]:
    """Per topic and partition, adjacent or overlapping [from, until) ranges as one; empty ranges left out."""
    out: list[dict] = []
    ordered = sorted((r for r in ranges if r.size > 0), key=lambda r: (r.topic, r.partition, r.from_offset))
    for (topic, partition), group in groupby(ordered, key=lambda r: (r.topic, r.partition)):
        spans: list[list[int]] = []
        for r in group:
            if spans and r.from_offset <= spans[-1][1]:
                spans[-1][1] = max(spans[-1][1], r.until_offset)
            else:
                spans.append([r.from_offset, r.until_offset])
        out.extend({"topic": topic, "partition": partition, "from": a, "until": b} for a, b in spans)
    return out
