"""A pipeline's lag status as terminal text (`microingest lag`)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from microingest.lag.retention import Horizon
from microingest.lag.status import PipelineStatus


def age(delta: timedelta | None) -> str:
    if delta is None:
        return "unknown"
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}min"
    return f"{seconds / 3600:.1f}h"


def status_lines(status: PipelineStatus, now: datetime | None = None) -> list[str]:
    now = now or datetime.now(timezone.utc)
    since = f"{age(now - status.last_commit)} ago" if status.last_commit else "never"
    lines = [
        f"{status.pipeline} ({status.sources}): {status.verdict.state.name}  {status.verdict.reason}",
        f"  offset lag {status.offset_lag:,}, time lag {age(status.time_lag)}; last commit {since}; "
        f"window {age(status.window)}",
    ]
    lines += [
        f"  GONE: topic {topic} matches but Kafka no longer lists it; its positions stay in the ledger"
        for topic in status.gone
    ]
    lines += [
        f"  AT_RISK: {t}[{p}]'s unread records may be deleted by {h.cause} in {age(_seconds(h))} "
        f"(retention_margin {age(timedelta(seconds=status.retention_margin or 0))})"
        for (t, p), h in status.at_risk
    ]
    if status.partitions:
        width = max(len("topic"), *(len(lag.topic) for lag, _ in status.partitions))
        lines.append(
            f"  {'topic':<{width}} {'partition':>9} {'position':>12} {'last stable':>12} {'offset lag':>11} "
            f"{'time lag':>10} {'retention':>10}  state  reason"
        )
        for lag, verdict in status.partitions:
            time_lag = age(lag.time_lag) + ("~" if lag.time_source == "interpolated" else "")
            left = status.retention.get(lag.key, Horizon())
            horizon = "-" if left.seconds is None else age(_seconds(left))
            lines.append(
                f"  {lag.topic:<{width}} {lag.partition:>9} {lag.position:>12,} {lag.latest:>12,} {lag.lag:>11,} "
                f"{time_lag:>10} {horizon:>10}  {verdict.state.name:<5}  {verdict.reason}"
            )
    if status.batches:
        lines.append("  last batches:")
        for b in status.batches:
            lines.append(
                f"    {b.committed_at:%Y-%m-%d %H:%M:%S} {b.kind:<8} {b.records_read:>9,} read "
                f"{b.rows_written:>9,} rows {b.dead_letters:>5,} dead letters {b.seconds:>7.1f}s "
                f"({b.rows_per_second:,.0f} rows/s)" + (f"  {b.note}" if b.note else "")
            )
    return lines


def _seconds(h: Horizon) -> timedelta:
    return timedelta(seconds=h.seconds or 0.0)
