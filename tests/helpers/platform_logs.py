"""Every log the running platform writes (its services', Airflow's and its tasks', Spark's, Postgres'), read from
where a test began: for claims that something never reaches a log."""

from __future__ import annotations

from pathlib import Path

from local_platform import postgres
from microingest import settings


def platform_logs() -> dict[Path, int]:
    """Each log file of the platform and its size now. Kafka's topic data is not a log of the platform's: its
    records are in it by design."""
    state = settings.state_dir()
    found = [p for p in state.rglob("*") if p.is_file() and _is_log(p.relative_to(state))]
    found.append(postgres.log_file())
    return {p: p.stat().st_size for p in found if p.exists()}


def written_since(sizes: dict[Path, int]) -> dict[Path, str]:
    """What each log holds past its size in `sizes` (the whole of a log begun since)."""
    written = {}
    for path in platform_logs():
        with path.open("rb") as f:
            f.seek(sizes.get(path, 0))
            written[path] = f.read().decode("utf-8", "replace")
    return written


def _is_log(relative: Path) -> bool:
    if relative.parts[:2] == ("kafka", "data"):
        return False
    return relative.suffix in (".log", ".out", ".err") or "logs" in relative.parts
