"""The worker daemon drops only the archives bundled in the pyspark package it can import instead."""

from __future__ import annotations

from microingest.spark.worker_daemon import drop_bundled_archives, without_bundled_archives


def test_archives_inside_the_installed_pyspark_go_and_others_stay(tmp_path):
    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    jars = site / "pyspark" / "jars"
    jars.mkdir()
    bundled = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(jars / "spark-core_2.13-4.0.0.jar")]
    elsewhere = str(tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip")
    path = ["/work", *bundled, elsewhere, str(site), "/usr/lib/python311.zip"]
    assert without_bundled_archives(path) == ["/work", elsewhere, str(site), "/usr/lib/python311.zip"]


def test_without_an_installed_pyspark_nothing_changes(tmp_path):
    path = [str(tmp_path / "spark-home" / "python" / "lib" / "pyspark.zip"), str(tmp_path)]
    assert without_bundled_archives(path) == path


def test_the_dropped_archives_importers_leave_the_importer_cache_too(tmp_path):
    site = tmp_path / "site-packages"
    (site / "pyspark" / "python" / "lib").mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    bundled = str(site / "pyspark" / "python" / "lib" / "pyspark.zip")
    path = [bundled, str(site)]
    cache = {bundled: "a zipimporter", str(site): "a FileFinder", "/elsewhere": None}
    drop_bundled_archives(path, cache)
    assert path == [str(site)] and cache == {str(site): "a FileFinder", "/elsewhere": None}
