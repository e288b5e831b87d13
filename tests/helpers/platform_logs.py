"""Every log the running platform writes (its services', Airflow's and its tasks', Spark's, Postgres'), read from
where a test began: for claims that something never reaches a log."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from local_platform import postgres
from microingest import settings


def platform_logs() -> dict[Path, int]:
    """Each log file of the platform and its size now. Kafka's topic data is not a log of the platform's: its
    records are in it by design. Spark's scratch space is skipped: its folders come and go with each driver, and
    a walk that met one being removed would fail for nothing a log holds."""
    state = settings.state_dir()
    found = []
    for folder, subfolders, files in os.walk(state):  # os.walk passes over folders removed under it
        here = Path(folder)
        subfolders[:] = [s for s in subfolders if not _skipped(here.relative_to(state) / s)]
        found += [here / f for f in files if _is_log(here.relative_to(state) / f)]
    found.append(postgres.log_file())
    sizes = {}
    for path in found:
        with contextlib.suppress(FileNotFoundError):
            sizes[path] = path.stat().st_size
    return sizes


def written_since(sizes: dict[Path, int]) -> dict[Path, str]:
    """What each log holds past its size in `sizes` (the whole of a log begun since)."""
    written = {}
    for path in platform_logs():
        with path.open("rb") as f:
            f.seek(sizes.get(path, 0))
            written[path] = f.read().decode("utf-8", "replace")
    return written


def _skipped(relative: Path) -> bool:
    return relative.parts[:2] == ("kafka", "data") or relative.parts[:1] == ("spark-scratch",)


def _is_log(relative: Path) -> bool:
    return relative.suffix in (".log", ".out", ".err") or "logs" in relative.parts
