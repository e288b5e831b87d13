"""`make install`'s step that writes the class archive of the job's JVM (`class_archive`): the training application
(`entry/class_archive_job.py`) run by spark-submit in local mode with the job's conf and jars, its JVM archiving the
classes it loaded as it exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from microingest.spark import class_archive
from microingest.spark.submit import submit_argv


def build() -> Path:
    """Write the archive: run the training application with the job's conf and jars and keep what its JVM loaded."""
    target = class_archive.archive_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    target.unlink(missing_ok=True)  # an archive of other jars must not be mapped by the JVM that writes the new one
    script = Path(__file__).parent / "entry" / "class_archive_job.py"
    argv = submit_argv(script, [], "microingest-class-archive", "local[2]", {"spark.ui.enabled": "false"})
    # The driver's JVM is the one to write it (in local mode it runs the tasks too); its many lines on classes it
    # cannot archive (generated accessors, pre-Java 6 class files) are not news.
    dump = f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds=error,cds+dynamic=error"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {dump}".strip()}
    log = target.with_suffix(".log")
    with log.open("w") as out:
        done = subprocess.run(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not partial.is_file():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        raise RuntimeError(f"the training application wrote no class archive (exit {done.returncode}); {log}:\n{tail}")
    partial.replace(target)
    return target


if __name__ == "__main__":
    print(f"class archive of the job's JVM: {build()}", file=sys.stderr)
