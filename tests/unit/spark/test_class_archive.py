"""The job's JVMs map the class archive `make install` built, and run as before when there is none."""

from __future__ import annotations

from microingest.spark.submit import JOB_CONF, job_conf, submit_argv

JVM_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


def test_the_driver_and_the_executors_map_the_archive_beside_their_own_options(tmp_path, monkeypatch):
    archive = tmp_path / "classes.jsa"
    archive.write_bytes(b"archive")
    monkeypatch.setenv("MICROINGEST_SPARK_CLASS_ARCHIVE", str(archive))
    conf = job_conf()
    for key in JVM_OPTIONS:
        assert conf[key] == f"{JOB_CONF[key]} -XX:SharedArchiveFile={archive}"
    assert {k: v for k, v in conf.items() if k not in JVM_OPTIONS} == {
        k: v for k, v in JOB_CONF.items() if k not in JVM_OPTIONS
    }
    (tmp_path / "kafka.jar").write_bytes(b"")
    monkeypatch.setenv("MICROINGEST_SPARK_JARS_DIR", str(tmp_path))
    argv = submit_argv(tmp_path / "job.py", [], "job")
    assert f"spark.executor.extraJavaOptions={conf['spark.executor.extraJavaOptions']}" in argv


def test_without_an_archive_the_options_are_the_jobs_own(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROINGEST_SPARK_CLASS_ARCHIVE", str(tmp_path / "none.jsa"))
    assert job_conf() == JOB_CONF
