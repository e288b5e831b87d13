"""A class-data archive of the job's JVM (JDK CDS): Spark's classes, parsed and verified once at install.

A spark-submit job spends much of its first seconds loading classes from Spark's jars, in the driver and again in each
executor a standalone cluster starts for it. `make install` runs `class_archive_build` once: a short Spark
application in local mode (`entry/class_archive_job.py`: a session, the job's Arrow round trip through Python, SQL,
the Kafka source) whose JVM writes the classes it loaded to the archive as it exits. A job's JVMs then map that
archive instead: on the development machine a spark-submit test job took 8.3 s instead of 12.9 s.

The archive holds only what the JDK derived from the jars; the JVM checks it against its own build and class path
and, should either differ, runs without it (one warning line), as it does, silently, when the file is absent (a Spark
worker on another machine): it is never needed, only faster.
"""

from __future__ import annotations

import os
from pathlib import Path

from microingest import settings


def archive_path() -> Path:
    return Path(os.environ.get("MICROINGEST_SPARK_CLASS_ARCHIVE", settings.install_dir() / "spark" / "classes.jsa"))


def java_options() -> str:
    """The JVM option that maps the archive (for spark.driver/executor.extraJavaOptions), or none when there is no
    archive here."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path.is_file() else ""
