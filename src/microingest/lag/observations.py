"""The recorded lag history in Postgres: observations per partition, the latest planning outcome, the last commit."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from microingest.batches import PartitionId, Sources
from microingest.lag.states import Observation

KEEP = timedelta(days=7)


def record(
    conn,
    pipeline: str,
    ledger: Mapping[PartitionId, int | None],
    log_ends: Mapping[PartitionId, int],
    source: str,
    at: datetime | None = None,
) -> None:
    """One observation per partition of `log_ends` (in the caller's transaction), made `at` (default: now on
    Postgres' clock), and the history beyond KEEP pruned."""
    keys = sorted(log_ends)
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO microingest.lag_observations (pipeline, topic, partition, position, log_end, source, "
            "observed_at) SELECT %s, t, p, pos, e, %s, coalesce(%s::timestamptz, clock_timestamp()) "
            "FROM unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[]) AS u(t, p, pos, e)",
            (
                pipeline,
                source,
                at,
                [t for t, _ in keys],
                [p for _, p in keys],
                [ledger.get(k) for k in keys],
                [log_ends[k] for k in keys],
            ),
        )
        cur.execute(
            "DELETE FROM microingest.lag_observations WHERE pipeline = %s AND observed_at < clock_timestamp() - %s",
            (pipeline, KEEP),
        )


def record_planning(conn, pipeline: str, error: str | None) -> None:
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO microingest.planning_health (pipeline, error) VALUES (%s, %s) ON CONFLICT (pipeline) "
            "DO UPDATE SET checked_at = clock_timestamp(), error = EXCLUDED.error",
            (pipeline, error),
        )


def planning_error(conn, pipeline: str) -> str | None:
    with conn.cursor() as cur:
        cur.execute("SELECT error FROM microingest.planning_health WHERE pipeline = %s", (pipeline,))
        row = cur.fetchone()
    return row[0] if row else None


def record_sources(conn, pipeline: str, sources: Sources, source: str) -> None:
    """An observation of every partition of every topic the pipeline reads, as a planning saw them."""
    ledger = {(t, p): o for t, pos in sources.positions.items() for p, o in pos.ledger.items()}
    ends = {(t, p): o for t, pos in sources.positions.items() for p, o in pos.latest.items()}
    record(conn, pipeline, ledger, ends, source)


def observations(conn, pipeline: str, since: datetime) -> dict[PartitionId, list[Observation]]:
    """Per partition, the observations since `since`, oldest first."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT topic, partition, observed_at, position, log_end FROM microingest.lag_observations WHERE "
            "pipeline = %s AND observed_at >= %s ORDER BY observed_at",
            (pipeline, since),
        )
        out: dict[PartitionId, list[Observation]] = {}
        for topic, partition, at, position, end in cur.fetchall():
            out.setdefault((topic, partition), []).append(Observation(at, position, end))
    return out


def last_commit(conn, pipeline: str) -> datetime | None:
    """When the pipeline last committed a live batch that read records."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT max(committed_at) FROM microingest.batches WHERE pipeline = %s AND kind = 'ingest' "
            "AND records_read > 0",
            (pipeline,),
        )
        return cur.fetchone()[0]
