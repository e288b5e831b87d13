"""A run on Spark: its plan committed batch by batch in one Spark application, resuming where earlier tries of the
same DAG run stopped, until the plan is done or its time budget is spent."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from functools import partial

from microingest.batches import RunOutcome, RunPlan
from microingest.commit.history import committed_by_run
from microingest.spark.batch import BatchTooLargeError, commit_batch, read_batch
from microingest.spark.connect import interrupt_own
from microingest.spark.job import IngestJob
from microingest.spark.read_ahead import ReadAhead

log = logging.getLogger(__name__)


def run_plan(job: IngestJob, plan: RunPlan, outcome: RunOutcome | None = None, clock=time.monotonic) -> RunOutcome:
    """Commit `plan` into `outcome` (a fresh one by default; the job passes its own so a failure still reports what
    was committed before it).

    With a DAG run id, batches that earlier tries of the same run committed are left out: a retry goes on where the
    failed try stopped, and a retry after a commit whose acknowledgement was lost finds the work done. The live
    positions each live batch commits are handed to the job's consumer-group mirror. A batch too large for the driver
    to collect decoded is split: the rest of the run goes on in batches of half its size, as often as needed."""
    outcome = outcome if outcome is not None else RunOutcome()
    if job.run.run_id:
        plan = _resume(job, plan, outcome)
    started = clock()
    total, expected, first = plan.total_records, outcome.batches + plan.batches_needed, outcome.batches
    done = 0

    def spent() -> bool:
        budget = plan.time_budget_seconds
        return budget is not None and outcome.batches > first and clock() - started >= budget

    # Tags are a thread's own: the read-ahead thread's Spark operations carry the job's too, so that a failed run
    # interrupts them (a Spark Connect job's; a spark-submit job waits for its read ahead to end).
    tags = job.spark.getTags()
    interrupt = partial(interrupt_own, job.spark) if tags else None
    with ReadAhead(partial(read_batch, job), partial(_tag, job.spark, tags), interrupt) as reading:
        while plan.ranges:
            if spent():
                outcome.remaining = plan.total_records
                log.info(
                    "time budget of %ss spent after %d batch(es); %d records left for the next run",
                    plan.time_budget_seconds,
                    outcome.batches - first,
                    outcome.remaining,
                )
                break
            batch, rest = plan.next_batch(outcome.batches + 1)
            batch_started = clock()
            try:
                decoded = reading.take(batch)
            except BatchTooLargeError as exc:
                if batch.offsets == 1:
                    raise
                plan = replace(plan, batch_cap=max(1, batch.offsets // 2))
                expected = outcome.batches + plan.batches_needed
                log.warning(
                    "%s; nothing was written, splitting it: batches of at most %d records from here",
                    exc,
                    plan.batch_cap,
                )
                continue
            if rest.ranges and job.read_ahead and not spent():
                reading.start(rest.next_batch(outcome.batches + 2)[0])  # read while this batch commits
            result = commit_batch(job, batch, decoded)
            plan = rest
            outcome.add(result)
            if job.mirror is not None and not batch.is_backfill:
                job.mirror.publish({(r.topic, r.partition): r.until_offset for r in batch.ranges})
            done += batch.offsets
            seconds = max(clock() - batch_started, 1e-6)
            skipped = f", {result.skipped} already there and skipped" if result.skipped else ""
            log.info(
                "batch %d of %d committed (%s): %d records, %d rows written, %d dead letters%s in %.1fs "
                "(%.0f rows/s); offsets %d of %d done",
                outcome.batches,
                expected,
                result.batch_id,
                result.records_read,
                result.rows_written,
                result.dead_letters,
                skipped,
                seconds,
                result.records_read / seconds,
                done,
                total,
            )
    return outcome


def _tag(spark, tags: set[str]) -> None:
    for tag in tags:
        spark.addTag(tag)


def _resume(job: IngestJob, plan: RunPlan, outcome: RunOutcome) -> RunPlan:
    with job.systems.db() as conn:
        before = committed_by_run(conn, job.pipeline.name, job.run, plan.kind)
    if not before.batches:
        return plan
    outcome.extend(before)
    plan = plan.without(before.ranges)
    log.info(
        "run %s committed %d batch(es) in earlier tries (%d records); %d records of its plan remain",
        job.run.run_id,
        before.batches,
        before.records_read,
        plan.total_records,
    )
    return plan
