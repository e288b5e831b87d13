"""The note a DAG run carries in Airflow's grid: what the run did, in one line a person reads without the logs."""

from __future__ import annotations

from collections.abc import Sequence

from microingest.batches import CommittedBatch

DRY_RUN_SUFFIX = " (dry run: nothing written)"
FAILED = ("failed", "upstream_failed")


def run_note(
    batches: Sequence[CommittedBatch],
    elapsed_seconds: float,
    *,
    ingest_state: str | None,
    plan_summary: str | None,
    dry_run: bool,
    gate_state: str | None = None,
    remaining: int = 0,
    restarts: Sequence[str] = (),
) -> str:
    """`batches` are what the run committed over all its tries; the states are its ingest task's and its lag gate's
    (None without one); `plan_summary` what the ingest task planned (None: it failed before planning anything);
    `restarts` the notes of the topic restarts its planning made, which come first."""
    note = _what_it_did(batches, elapsed_seconds, gate_state, ingest_state, plan_summary, dry_run, remaining)
    return "; ".join([*restarts, note])


def _what_it_did(
    batches: Sequence[CommittedBatch],
    elapsed_seconds: float,
    gate_state: str | None,
    ingest_state: str | None,
    plan_summary: str | None,
    dry_run: bool,
    remaining: int,
) -> str:
    if batches and batches[0].kind == "redrive":
        note = (
            f"redrive: {_count(len(batches), 'batch', 'batches')}, "
            f"{_count(sum(b.records_read for b in batches), 'dead letter', 'dead letters')} decoded again, "
            f"{sum(b.rows_written for b in batches):,} rows written, "
            f"{sum(b.dead_letters for b in batches):,} still dead letters, {duration(elapsed_seconds)}"
        )
        return note + ("; then failed (see the ingest task's log)" if ingest_state in FAILED else "")
    if batches:
        note = (
            f"{_count(len(batches), 'batch', 'batches')}, {sum(b.records_read for b in batches):,} records, "
            f"{sum(b.rows_written for b in batches):,} rows, "
            f"{_count(sum(b.dead_letters for b in batches), 'dead letter', 'dead letters')}, "
            f"{duration(elapsed_seconds)}"
        )
        if batches[0].kind != "ingest":
            note = f"{batches[0].kind}: {note}"  # backfill, or an operator's skip (its records are the dead letters)
        if remaining:
            note += f"; {remaining:,} records left to the next run (time budget spent)"
        if ingest_state in FAILED:
            note += "; then failed (see the ingest task's log), the rest is left to a retry or the next run"
        return note
    if ingest_state in FAILED:
        if plan_summary is None:
            return "failed while planning: nothing read (see the ingest task's log)"
        return "failed: nothing committed (see the ingest task's log)"
    if gate_state == "skipped":
        return "skipped before planning: too few records waited (lag gate)"
    if dry_run:
        return f"dry run: {(plan_summary or 'nothing planned').removesuffix(DRY_RUN_SUFFIX)}"
    if (plan_summary or "").startswith("redrive"):
        return "nothing to redrive: no unresolved dead letter selected"
    return "nothing to backfill" if (plan_summary or "").startswith("plan (backfill)") else "nothing new"


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _count(n: int, one: str, many: str) -> str:
    return f"{n:,} {one if n == 1 else many}"
