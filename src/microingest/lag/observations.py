"""The recorded lag history in Postgres: observations per partition, the latest planning outcome, the last commit."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from microingest.lag.states import Observation

KEEP = timedelta(days=7)


def record(
    conn,
    pipeline: str,
    ledger: Mapping[int, int | None],
    log_ends: Mapping[int, int],
    source: str,
    at: datetime | None = None,
) -> None:
    """One observation per partition of `log_ends` (in the caller's transaction), made `at` (default: now on
    Postgres' clock), and the history beyond KEEP pruned."""
    partitions = sorted(log_ends)
    with conn.cursor() as cur:
        cur.execute(
            "INSERT INTO microingest.lag_observations (pipeline, partition, position, log_end, source, "
            "observed_at) SELECT %s, p, pos, e, %s, coalesce(%s::timestamptz, clock_timestamp()) "
            "FROM unnest(%s::int[], %s::bigint[], %s::bigint[]) AS u(p, pos, e)",
            (pipeline, source, at, partitions, [ledger.get(p) for p in partitions], [log_ends[p] for p in partitions]),
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


def observations(conn, pipeline: str, since: datetime) -> dict[int, list[Observation]]:
    """Per partition, the observations since `since`, oldest first."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT partition, observed_at, position, log_end FROM microingest.lag_observations WHERE "
            "pipeline = %s AND observed_at >= %s ORDER BY observed_at",
            (pipeline, since),
        )
        out: dict[int, list[Observation]] = {}
        for partition, at, position, end in cur.fetchall():
            out.setdefault(partition, []).append(Observation(at, position, end))
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
