"""Where a run of the platform spent its time, measured in the same bench run: from the platform's batch history
(each batch's start, end of decoding and commit) and, through Airflow, the ingest task's start. It is what the report
shows beside a missed target: what bounds the figure."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from typing import Any

from microingest.systems.postgres import connection

# (key, name, what it holds), in the order time passes in a run
PHASES = (
    ("airflow", "Airflow", "trigger → ingest task start: the run scheduled, the task started"),
    (
        "job_start",
        "job start",
        "→ first batch: the run planned (through Airflow), the Spark application or client process, its session",
    ),
    ("decode", "read and decode", "Kafka read and decoding on the executors, collected by the driver"),
    ("commit", "commits", "fence, proof of the read, COPY into the target: one transaction per batch"),
    ("between", "between batches", "end of one batch's commit → start of the next"),
)
NAMES = {key: name for key, name, _ in PHASES}


def split(
    launched: float, batches: Sequence[tuple[float, float, float]], ingest_started: float | None = None
) -> dict[str, float]:
    """A run's time in seconds by phase. `batches` are (started, decoded, committed) epochs in the order they ran;
    `ingest_started` is the epoch the ingest task started when the run went through Airflow. The phases add up to
    launch → last commit."""
    if not batches:
        return {}
    job_launched = launched if ingest_started is None else ingest_started
    phases = {
        "airflow": 0.0 if ingest_started is None else ingest_started - launched,
        "job_start": batches[0][0] - job_launched,
        "decode": sum(decoded - started for started, decoded, _ in batches),
        "commit": sum(committed - decoded for _, decoded, committed in batches),
        "between": sum(nxt[0] - prev[2] for prev, nxt in itertools.pairwise(batches)),
    }
    if ingest_started is None:
        del phases["airflow"]
    return {key: round(value, 3) for key, value in phases.items()}


def median_split(splits: Sequence[dict[str, float]]) -> dict[str, float]:
    """Phase by phase, the median over several runs (the small batches)."""
    keys = [key for key in NAMES if splits and all(key in s for s in splits)]
    return {key: round(statistics.median(s[key] for s in splits), 3) for key in keys}


def batch_times(pg: dict[str, Any], pipeline: str, since: float) -> list[tuple[float, float, float]]:
    """(started, decoded, committed) epochs of the pipeline's batches committed after `since`, in order."""
    with connection(pg) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT extract(epoch FROM started_at), extract(epoch FROM coalesce(staged_at, committed_at)), "
            "extract(epoch FROM committed_at) FROM microingest.batches WHERE pipeline = %s AND kind = 'ingest' "
            "AND committed_at >= to_timestamp(%s) ORDER BY started_at",
            (pipeline, since),
        )
        return [(float(started), float(decoded), float(committed)) for started, decoded, committed in cur.fetchall()]


def bottleneck(phases: dict[str, float]) -> str:
    """The phases as shares of the run, largest first: e.g. 'read and decode 71%, commits 19%, job start 6%, ...'."""
    total = sum(phases.values())
    if total <= 0:
        return ""
    ranked = sorted(phases.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{NAMES[key]} {value / total:.0%}" for key, value in ranked if value / total >= 0.01)
