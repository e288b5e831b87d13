"""A redrive run in its job: the plan's dead letters read from Postgres page by page in position order, each page
decoded by the same reference decoder a batch's executors run (`decoder.Decoder`, here in the job's own process:
the records are already at hand) and committed as a batch of kind `redrive` (`commit.redrive`).

A retried try goes on after the last position its run's earlier tries committed; what they resolved is no longer
selected anyway, so nothing is resolved twice whatever the order of retries, redrives and backfills."""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timezone

import pyarrow as pa

from microingest import faults, settings
from microingest.batches import Batch, OffsetRange, RunOutcome, RunPlan, StoredRecord
from microingest.commit.copy_commit import DecodedBatch, commit_decoded
from microingest.commit.dead_letters import unresolved_page
from microingest.commit.history import committed_by_run
from microingest.commit.sinks import sink_for
from microingest.commit.target_tables import check_target
from microingest.decode.staged_rows import stored_records_batch
from microingest.errors import Refused
from microingest.spark.decoder import DECODED_ARROW_SCHEMA, Decoder, collected
from microingest.spark.job import IngestJob

log = logging.getLogger(__name__)


class RedriveRefusedError(Refused):
    """The declaration the job decodes with refuses the redrive its plan was made for (a statement, check or mask
    declared since): nothing was written."""


def redrive_plan(job: IngestJob, plan: RunPlan, outcome: RunOutcome | None = None) -> RunOutcome:
    """Commit the redrive `plan` into `outcome`, batch by batch, until no selected dead letter is left after the last
    position taken."""
    outcome = outcome if outcome is not None else RunOutcome()
    if plan.redrive is None or not plan.ranges:
        return outcome
    # Judged again here, by the declaration these records are decoded with: it may have changed since the plan (an
    # Airflow retry, a cleared task re-running an old plan).
    refusal = job.pipeline.redrive_refusal
    if refusal is not None:
        raise RedriveRefusedError(f"the declaration changed since the redrive was planned: {refusal}")
    after = _resume(job, outcome) if job.run.run_id else None
    pipeline, sink = job.pipeline, sink_for(job.pipeline)
    cap, max_bytes = plan.batch_cap, settings.redrive_page_bytes()
    while True:
        with job.systems.db() as conn, conn.cursor() as cur:
            check_target(cur, pipeline)
            records = unresolved_page(cur, pipeline.name, plan.ranges, plan.redrive, after, cap, max_bytes)
        if not records:
            break
        batch = Batch("redrive", _spans(records), outcome.batches + 1, note=plan.note)
        try:
            decoded = _decoded(job, records, str(uuid.uuid4()))
        except (MemoryError, pa.ArrowCapacityError) as exc:
            if len(records) == 1:
                raise
            # As a live batch too large for the driver: nothing was written, the page is split.
            cap, max_bytes = max(1, len(records) // 2), max(1, max_bytes // 2)
            log.warning(
                "redrive page of %d dead letters could not be decoded at once (%s); nothing was written, pages of at "
                "most %d dead letters and %d bytes from here",
                len(records),
                type(exc).__name__,
                cap,
                max_bytes,
            )
            continue
        faults.crash_point("after_decode")
        with job.systems.db() as conn:
            conn.autocommit = True
            result = commit_decoded(conn, sink, batch, decoded, job.run)
        faults.crash_point("after_commit")
        outcome.add(result)
        after = (records[-1].topic, records[-1].partition, records[-1].offset)
        log.info(
            "redrive batch %d committed (%s): %d dead letters read, %d resolved, %d still dead letters%s; "
            "%d resolved so far",
            outcome.batches,
            result.batch_id,
            result.records_read,
            result.records_read - result.dead_letters - result.skipped,
            result.dead_letters,
            f", {result.skipped} resolved by someone else meanwhile" if result.skipped else "",
            outcome.records_read - outcome.dead_letters - outcome.skipped,
        )
    return outcome


def _decoded(job: IngestJob, records: list[StoredRecord], batch_id: str) -> DecodedBatch:
    started = datetime.now(timezone.utc)
    decoder = Decoder(job.pipeline, batch_id, job.systems.registry, into_target=False)
    table = pa.Table.from_batches(list(decoder(iter([stored_records_batch(records)]))), schema=DECODED_ARROW_SCHEMA)
    return collected([table], decoder, started)


def _spans(records: list[StoredRecord]) -> tuple[OffsetRange, ...]:
    """The batch's ranges: per partition, from its first dead letter's offset to past its last (the read's proof
    checks each record lies inside, once)."""
    spans: dict[tuple[str, int], list[int]] = {}
    for r in records:
        spans.setdefault((r.topic, r.partition), [r.offset, r.offset + 1])[1] = r.offset + 1
    return tuple(OffsetRange(t, p, lo, hi, None) for (t, p), (lo, hi) in spans.items())


def _resume(job: IngestJob, outcome: RunOutcome) -> tuple[str, int, int] | None:
    with job.systems.db() as conn:
        before = committed_by_run(conn, job.pipeline.name, job.run, "redrive")
    if not before.batches:
        return None
    outcome.extend(before)
    last = max(before.ranges, key=lambda r: (r.topic, r.partition, r.until_offset))
    log.info(
        "run %s committed %d redrive batch(es) in earlier tries (%d dead letters read); going on after %s",
        job.run.run_id,
        before.batches,
        before.records_read,
        last,
    )
    return last.topic, last.partition, last.until_offset - 1
