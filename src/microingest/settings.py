"""Where things live. Every path can be overridden by environment so a deployment need not mirror this repo."""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def repo_root() -> Path:
    return Path(os.environ.get("MICROINGEST_HOME", _REPO))


def pipelines_dir() -> Path:
    return Path(os.environ.get("MICROINGEST_PIPELINES_DIR", repo_root() / "pipelines"))


def sql_dir() -> Path:
    return Path(os.environ.get("MICROINGEST_SQL_DIR", repo_root() / "sql"))


def state_dir() -> Path:
    return Path(os.environ.get("MICROINGEST_STATE", repo_root() / ".state"))


def install_dir() -> Path:
    """Where `make install` puts what it downloads (broker, Spark and registry jars), shared by every topology."""
    return Path(os.environ.get("MICROINGEST_INSTALL", repo_root() / ".state"))


def spark_job_path() -> Path:
    return Path(os.environ.get("MICROINGEST_SPARK_JOB", repo_root() / "spark_jobs" / "ingest_job.py"))


def spark_jars() -> list[str]:
    """Spark's Kafka source and its dependencies, resolved from Maven Central by `make install`."""
    folder = Path(os.environ.get("MICROINGEST_SPARK_JARS_DIR", install_dir() / "spark" / "jars"))
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no Spark Kafka jars in {folder}; run `make install` (or set MICROINGEST_SPARK_JARS_DIR)"
        )
    return jars


def commit_lock_timeout_ms() -> int:
    """How long a batch's commit waits for the pipeline lock and the ledger rows before failing (and being retried)."""
    return int(float(os.environ.get("MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS", "120")) * 1000)


def commit_statement_timeout_ms() -> int:
    """The longest any one statement of a commit may run (publishing a large batch is the long one)."""
    return int(float(os.environ.get("MICROINGEST_COMMIT_STATEMENT_TIMEOUT_SECONDS", "1800")) * 1000)
