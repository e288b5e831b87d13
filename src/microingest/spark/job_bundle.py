"""The job's Python for a Spark cluster that has none of it: microingest and what its executor-side code imports,
packed as one archive Spark unpacks beside each executor, so a team's cluster needs nothing installed.

The executors run the job's mapInArrow functions (the decoders, the SQL transform's row checks), which import
microingest and some of its dependencies. A Spark worker's Python is expected to have pyspark's own requirements
(pyarrow, pandas, numpy: `PROVIDED`) and nothing else. The bundle holds the rest, copied from this installation (no
download), with a `bin/python` that runs the executor's own `python3.X` (the driver's minor version, as PySpark
requires anyway) with the bundle first on its path: spark-submit ships it with `spark.archives` and names that
wrapper as `spark.pyspark.python`; a Spark Connect job adds it to its session as an archive artifact and names it as
`spark.sql.execution.pyspark.python`.

Which distributions go in is found by importing the executor-side modules (`EXECUTOR_MODULES`) in a child
interpreter, once per installation: the bundle is cached under a name derived from every installed distribution's
version and microingest's own files, so a job finds it built and a changed installation builds a new one.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import logging
import os
import subprocess
import sys
import sysconfig
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement

from microingest import settings

log = logging.getLogger(__name__)

# What a Spark worker's Python has: pyspark arrives with Spark itself (pyspark.zip, py4j), and pyspark's SQL and
# pandas requirements with their own dependencies are what `pip install pyspark[sql]` puts beside it.
PROVIDED = frozenset(
    {"pyspark", "pyspark-client", "py4j", "pyarrow", "pandas", "numpy", "python-dateutil", "pytz", "tzdata", "six"}
)
# The modules an executor imports: the mapInArrow functions' own, the worker daemon, and what the decoders import
# only when a record needs it (the registry formats).
EXECUTOR_MODULES = (
    "microingest.spark.worker_daemon",
    "microingest.spark.batch",
    "microingest.spark.typed_rows",
    "microingest.spark.sql_transform",
    "microingest.decode.avro",
    "microingest.decode.avro_batch",
    "microingest.decode.jvm_avro",
    "microingest.decode.protobuf",
    "microingest.decode.keys",
    "microingest.decode.registered",
    "fastavro",
    "google.protobuf.message_factory",
    "google.protobuf.json_format",
    "confluent_kafka.schema_registry",
    "confluent_kafka.schema_registry.error",
)
PACKAGE = "microingest"
PREFIX = "microingest-python"
SITE = "site"
WRAPPER = "bin/python"


@dataclass(frozen=True)
class JobBundle:
    path: Path

    @property
    def name(self) -> str:
        """The folder an executor unpacks it into: the file's name, which changes with its content."""
        return self.path.name.removesuffix(".tar.gz")

    @property
    def python(self) -> str:
        """The executor's Python for this bundle, relative to where Spark unpacked it."""
        return f"{self.name}/{WRAPPER}"

    def archive(self) -> str:
        """The archive as Spark names one to unpack: `path#folder`."""
        return f"{self.path}#{self.name}"


def cache_dir() -> Path:
    return Path(os.environ.get("MICROINGEST_JOB_BUNDLES", settings.state_dir() / "job-bundles"))


def job_bundle() -> JobBundle:
    """This installation's bundle, built on first use."""
    folder = cache_dir()
    path = folder / f"{PREFIX}-{installation_key()}.tar.gz"
    if not path.is_file():
        build(path)
    return JobBundle(path)


def installation_key() -> str:
    """A digest of what a bundle of this installation would hold, from file metadata alone (a job pays for it on every
    start): the Python version, the site-packages folders' modification times (installing or removing a distribution
    changes their entries) and microingest's own files (an editable install changes without a new version)."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    folders = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    for entry in folders + sorted(str(p) for p in _package_files()):
        stat = os.stat(entry)
        digest.update(f"{entry}\0{stat.st_mtime_ns}\0{stat.st_size}\n".encode())
    return digest.hexdigest()[:16]


def build(path: Path) -> None:
    started = time.monotonic()
    distributions = executor_distributions()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
        tar.addfile(_wrapper_info(), io.BytesIO(wrapper().encode()))
        for source, arcname in _files(distributions):
            tar.add(source, f"{SITE}/{arcname}", recursive=False)
    os.replace(partial, path)
    _forget_old(path)
    log.info(
        "built the job's Python bundle for executors (%s, %.1f MiB, in %.1f s): microingest and %s",
        path.name,
        path.stat().st_size / 2**20,
        time.monotonic() - started,
        ", ".join(sorted(distributions)) or "nothing else",
    )


def _forget_old(kept: Path) -> None:
    """Bundles of earlier installations, a day after their last build: a job started before may still serve one."""
    for old in kept.parent.glob(f"{PREFIX}-*.tar.gz"):
        if old != kept and time.time() - old.stat().st_mtime > 86400:
            old.unlink(missing_ok=True)


def executor_distributions() -> set[str]:
    """The installed distributions the executor-side modules import, less what a Spark worker has (`PROVIDED`) and
    microingest itself (packed from its package folder, which an editable install's metadata does not list)."""
    probe = (  # less what the interpreter loaded before (site's .pth hooks: setuptools' _distutils_hack)
        "import importlib, json, sys\n"
        "started = {m.split('.')[0] for m in sys.modules}\n"
        f"for m in {EXECUTOR_MODULES!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} - started)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return distributions_of(json.loads(out.splitlines()[-1]))


def distributions_of(modules: list[str]) -> set[str]:
    """The distributions owning `modules`, with what they require in turn (their code may import it only when used,
    as httpx does its transport), less what a Spark worker has and microingest itself."""
    owners = importlib.metadata.packages_distributions()
    skip = {_normal(name) for name in PROVIDED | {PACKAGE}}
    found: dict[str, str] = {}
    todo = [dist for module in modules for dist in owners.get(module, [])]
    while todo:
        name = todo.pop()
        if _normal(name) in skip or _normal(name) in found:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional requirement this installation does without
        found[_normal(name)] = dist.metadata["Name"]
        for spec in dist.requires or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return set(found.values())


def wrapper() -> str:
    python = "python{}.{}".format(*sys.version_info[:2])
    return f"""#!/bin/sh
# The executor's own {python} with microingest's job code first on its path (microingest.spark.job_bundle).
here=$(cd "$(dirname "$0")/.." && pwd -P)
PYTHONPATH="$here/{SITE}${{PYTHONPATH:+:$PYTHONPATH}}"
export PYTHONPATH
command -v {python} >/dev/null 2>&1 || {{
  echo "microingest's job needs {python} on this Spark executor's PATH (the Airflow worker's version, as PySpark" \\
    "requires), with pyspark's requirements (pyarrow, pandas, numpy)" >&2
  exit 127
}}
exec {python} "$@"
"""


def _wrapper_info() -> tarfile.TarInfo:
    info = tarfile.TarInfo(WRAPPER)
    info.size = len(wrapper().encode())
    info.mode = 0o755
    return info


def _files(distributions: set[str]):
    yield from ((path, path.relative_to(_package_root().parent).as_posix()) for path in _package_files())
    for name in sorted(distributions):
        dist = importlib.metadata.distribution(name)
        for file in dist.files or []:
            if file.parts[0] == ".." or not (source := Path(str(dist.locate_file(file)))).is_file():
                continue  # console scripts live outside site-packages; RECORD may list files since removed
            yield source, file.as_posix()


def _package_root() -> Path:
    import microingest

    return Path(microingest.__file__).resolve().parent


def _package_files() -> list[Path]:
    return [p for p in _package_root().rglob("*") if p.is_file() and "__pycache__" not in p.parts]


def _normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")
