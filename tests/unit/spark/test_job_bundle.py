"""The job's Python for a cluster that has none of it: what the bundle holds, how its Python starts, and how a job on
a cluster (not on this machine) names it to Spark."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import pytest

from microingest.spark import job_bundle
from microingest.spark.submit import JOB_CONF, job_conf


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bundles")
    os.environ["MICROINGEST_JOB_BUNDLES"] = str(folder)
    try:
        yield job_bundle.job_bundle()
    finally:
        del os.environ["MICROINGEST_JOB_BUNDLES"]


def test_the_bundle_holds_microingest_and_what_its_executor_code_imports_but_not_what_spark_workers_have(bundle):
    with tarfile.open(bundle.path) as tar:
        names = tar.getnames()
        wrapper = tar.getmember("bin/python")
    tops = {n.split("/")[1] for n in names if n.startswith("site/")}
    assert {"microingest", "pgpq", "fastavro", "google", "confluent_kafka", "sqlglot", "psycopg2"} <= tops
    assert not tops & {"pyspark", "py4j", "pyarrow", "pandas", "numpy", "airflow", "kafka", "sqlalchemy"}
    assert "site/microingest/spark/decoder.py" in names
    assert not [n for n in names if "__pycache__" in n and n.startswith("site/microingest/")]
    assert wrapper.mode & 0o111


def unpack(bundle, folder) -> None:
    """As Spark unpacks an archive on a worker (Hadoop's FileUtil.unTar runs tar)."""
    (folder / bundle.name).mkdir()
    subprocess.run(["tar", "-xzf", str(bundle.path), "-C", str(folder / bundle.name)], check=True)


def test_its_python_runs_the_executors_own_interpreter_with_the_bundle_first_on_the_path(bundle, tmp_path):
    unpack(bundle, tmp_path)
    python = tmp_path / bundle.python
    here = os.path.dirname(sys.executable)  # a python3.X found on PATH, as on a worker
    probe = "import microingest, sys; print(microingest.__file__); print(sys.version_info[:2])"
    done = subprocess.run(
        [str(python), "-c", probe],
        env={"PATH": f"{here}:/usr/bin:/bin", "PYTHONPATH": "/elsewhere"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    module, version = done.stdout.splitlines()
    assert module == str((tmp_path / bundle.name / "site" / "microingest" / "__init__.py").resolve())
    assert version == str(sys.version_info[:2])


def test_without_the_drivers_python_version_the_executor_says_what_it_needs(bundle, tmp_path):
    unpack(bundle, tmp_path)
    done = subprocess.run([str(tmp_path / bundle.python), "-V"], env={"PATH": str(tmp_path)}, capture_output=True)
    assert done.returncode == 127
    version = "python{}.{}".format(*sys.version_info[:2])
    assert f"microingest's job needs {version} on this Spark executor's PATH".encode() in done.stderr


def test_distributions_a_spark_worker_has_are_not_shipped():
    shipped = job_bundle.distributions_of(["pyarrow", "pandas", "numpy", "pyspark", "fastavro", "microingest"])
    assert shipped == {"fastavro"}


def test_what_a_shipped_distribution_requires_is_shipped_too_though_imported_only_when_used():
    # httpx2 imports its transport, httpcore2, at its first request: after the probe's imports
    assert {"httpx2", "httpcore2", "h11"} <= {d.lower() for d in job_bundle.distributions_of(["httpx2"])}


def test_the_same_installation_finds_the_bundle_it_built_and_a_changed_one_builds_another(bundle, monkeypatch):
    assert job_bundle.job_bundle() == bundle
    first = job_bundle.installation_key()
    changed = job_bundle._package_files()[0]
    stat = changed.stat()
    try:
        os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
        assert job_bundle.installation_key() != first
    finally:
        os.utime(changed, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert job_bundle.installation_key() == first


def test_a_job_on_this_machine_runs_this_python_and_a_job_on_a_cluster_ships_the_bundle(bundle, monkeypatch):
    monkeypatch.setenv("MICROINGEST_SPARK_CLASS_ARCHIVE", "/nonexistent.jsa")
    assert job_conf("local[2]") == JOB_CONF
    conf = job_conf("spark://spark-master:7077")
    assert conf["spark.archives"] == f"{bundle.path}#{bundle.name}"
    assert conf["spark.pyspark.python"] == f"./{bundle.name}/bin/python"
    assert conf["spark.pyspark.driver.python"] == sys.executable
    # the cluster's executors log with the cluster's configuration: this machine's path is not theirs
    assert "spark.executor.extraJavaOptions" not in conf
    assert conf["spark.driver.extraJavaOptions"] == JOB_CONF["spark.driver.extraJavaOptions"]
