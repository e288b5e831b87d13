"""What a pipeline's batch history adds up to, for counters and the batch-duration histogram: read at scrape time
from microingest.batches, the record every commit writes in its own transaction, so the figures survive restarts
and agree with what landed."""

from __future__ import annotations

from dataclasses import dataclass, field

# Seconds from a batch's start to its commit; a small batch takes about 2 s on the warm path, a full one up to minutes.
DURATION_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass(frozen=True)
class KindTotals:
    kind: str  # ingest | backfill | skip | redrive
    batches: int
    records_read: int
    rows_written: int
    dead_letters: int
    seconds: float  # the batches' durations summed
    le_counts: tuple[int, ...] = field(default=())  # batches no longer than each of DURATION_BUCKETS
    decoded_in_jvm: int = 0  # records the JVM's strict decoder read; the others went to the reference in Python


def batch_totals(conn, pipeline: str) -> list[KindTotals]:
    """Per kind of batch that reads records (pins and a new topic's record read none)."""
    buckets = ", ".join("count(*) FILTER (WHERE d <= %s)" for _ in DURATION_BUCKETS)
    with conn.cursor() as cur:
        cur.execute(
            "SELECT kind, count(*), sum(records_read), sum(rows_written), sum(dead_letters), sum(d), "
            f"coalesce(sum(decoded_in_jvm), 0), {buckets} "
            "FROM (SELECT kind, records_read, rows_written, dead_letters, decoded_in_jvm, "
            "extract(epoch FROM committed_at - started_at)::float8 AS d FROM microingest.batches "
            "WHERE pipeline = %s AND kind NOT IN ('pin', 'new_topic', 'waiting')) b GROUP BY kind ORDER BY kind",
            (*DURATION_BUCKETS, pipeline),
        )
        return [
            KindTotals(kind, n, int(read), int(written), int(dead), float(seconds or 0), tuple(les), int(in_jvm))
            for kind, n, read, written, dead, seconds, in_jvm, *les in cur.fetchall()
        ]
