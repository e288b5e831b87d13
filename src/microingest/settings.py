"""Where things live. What microingest ships (migrations, the Spark job) is found inside the installed package; the
rest can be set by environment, and the pipelines folder also by Airflow's configuration, so a deployment need not
mirror this repo.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parents[1]
PIPELINES_ENV = "MICROINGEST_PIPELINES_DIR"


def repo_root() -> Path:
    return Path(os.environ.get("MICROINGEST_HOME", _REPO))


def pipelines_dir() -> Path:
    """MICROINGEST_PIPELINES_DIR, else Airflow's `[microingest] pipelines_dir` where Airflow is installed, else this
    repository's pipelines/."""
    folder = os.environ.get(PIPELINES_ENV) or _airflow_option("pipelines_dir")
    return Path(folder) if folder else repo_root() / "pipelines"


def _airflow_option(key: str) -> str | None:
    try:
        # Imported here: the Spark job and the CLI read settings without Airflow installed, or before it is configured.
        from airflow.configuration import conf
    except ImportError:
        return None
    return conf.get("microingest", key, fallback=None) or None


def sql_dir() -> Path:
    """The migrations, shipped inside the package (this repository's sql/ points there)."""
    return Path(os.environ.get("MICROINGEST_SQL_DIR", _PACKAGE / "sql"))


def state_dir() -> Path:
    return Path(os.environ.get("MICROINGEST_STATE", repo_root() / ".state"))


def install_dir() -> Path:
    """Where `make install` puts what it downloads (broker, Spark and registry jars), shared by every topology."""
    return Path(os.environ.get("MICROINGEST_INSTALL", repo_root() / ".state"))


def spark_job_path() -> Path:
    """The ingest job's script, shipped inside the package in a folder of its own: Python puts a script's folder first
    on sys.path, where nothing else may shadow a module (this repository's spark_jobs/ingest_job.py points there)."""
    return Path(os.environ.get("MICROINGEST_SPARK_JOB", _PACKAGE / "spark" / "entry" / "ingest_job.py"))


def spark_log_config() -> Path:
    """The log4j2 configuration of the job's JVM, beside the script."""
    return spark_job_path().parent / "log4j2.properties"


def spark_jars() -> list[str]:
    """Spark's Kafka source and its dependencies, resolved from Maven Central by `make install`."""
    folder = Path(os.environ.get("MICROINGEST_SPARK_JARS_DIR", install_dir() / "spark" / "jars"))
    jars = sorted(str(p) for p in folder.glob("*.jar"))
    if not jars:
        raise FileNotFoundError(
            f"no Spark Kafka jars in {folder}; run `make install` (or set MICROINGEST_SPARK_JARS_DIR)"
        )
    return jars


def decoder_jar() -> Path | None:
    """The platform's decoding functions for Spark's JVM (build/jvm-decoders), built by `make install`; None when it
    was not built, and the reference decoder does every batch."""
    jar = Path(
        os.environ.get("MICROINGEST_DECODER_JAR", install_dir() / "spark" / "decoders" / "microingest-decoders.jar")
    )
    return jar if jar.is_file() else None


def decoder_digest(jar_bytes: bytes) -> str:
    """The SHA-256 of a decoder jar's bytes (`decoder_jar`): what tells one build from another."""
    return hashlib.sha256(jar_bytes).hexdigest()


def jvm_decoding() -> bool:
    """Whether JSON and Avro records may be decoded in Spark's JVM (`decode.jvm_spec`); `MICROINGEST_JVM_DECODING=off`
    leaves every record to the reference decoder."""
    return _on("MICROINGEST_JVM_DECODING")


def read_ahead() -> bool:
    """Whether a run reads its next batch while it commits one (`spark.read_ahead`); `MICROINGEST_READ_AHEAD=off`
    reads each batch only after the one before it committed."""
    return _on("MICROINGEST_READ_AHEAD")


def job_forks_socket() -> Path | None:
    """The socket of the job-forks server (`spark.job_fork_server`), which starts Spark Connect jobs with their imports
    already done; None with `MICROINGEST_JOB_FORKS=off`, when every job starts as a new interpreter."""
    if not _on("MICROINGEST_JOB_FORKS"):
        return None
    return Path(os.environ.get("MICROINGEST_JOB_FORKS_SOCKET", state_dir() / "run" / "job-forks.sock"))


def _on(variable: str) -> bool:
    return os.environ.get(variable, "on").lower() not in ("off", "0", "false", "no")


def commit_lock_timeout_ms() -> int:
    """How long a batch's commit waits for the pipeline lock and the ledger rows before failing (and being retried)."""
    return int(float(os.environ.get("MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS", "120")) * 1000)


def commit_statement_timeout_ms() -> int:
    """The longest any one statement of a commit may run (publishing a large batch is the long one)."""
    return int(float(os.environ.get("MICROINGEST_COMMIT_STATEMENT_TIMEOUT_SECONDS", "1800")) * 1000)


def redrive_page_bytes() -> int:
    """The most key, value and header bytes of dead letters a redrive reads and decodes at once (a page ends with the
    record that passes it), beside its pipeline's max_records_per_batch: 5,000 dead letters of a megabyte each would
    otherwise be one page of 5 GB."""
    return int(os.environ.get("MICROINGEST_REDRIVE_PAGE_BYTES", str(64 * 1024 * 1024)))


def batch_memory_bytes() -> int:
    """The most of a batch's decoded rows (and, apart, of its dead letters) the job's driver holds in memory: beyond
    it they wait for the batch's COPY in an unnamed temporary file (`commit.spool`), so a batch of any size costs the
    driver about this much and one Arrow chunk from Spark. `MICROINGEST_BATCH_MEMORY_MB`, 64 by default."""
    return int(float(os.environ.get("MICROINGEST_BATCH_MEMORY_MB", "64")) * 1024 * 1024)
