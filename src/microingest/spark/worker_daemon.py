"""pyspark's Python worker daemon (`spark.python.daemon.module`), started without the archives Spark puts first on
the workers' PYTHONPATH when the same pyspark is installed as a package.

Spark prepends pyspark.zip, py4j's zip and its core jar to every Python worker's `sys.path`. pyspark then calls
`importlib.invalidate_caches()` before each task, which makes every zip importer re-read its archive's directory:
about 0.3 s of CPU per task here (the profile of `make bench`), for nothing. Those archives ship inside the installed
pyspark package itself, so the installed modules are the same code and can be imported instead. Archives of another
Spark installation (a SPARK_HOME elsewhere) are left where they are.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys


def without_bundled_archives(path: list[str]) -> list[str]:
    """`path` minus the .zip/.jar entries that lie inside the pyspark package importable without them."""
    archives = [p for p in path if p.endswith((".zip", ".jar"))]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", [p for p in path if p not in archives])
    if spec is None or not spec.submodule_search_locations:
        return path
    package = os.path.realpath(next(iter(spec.submodule_search_locations))) + os.sep
    return [p for p in path if p not in archives or not os.path.realpath(p).startswith(package)]


def drop_bundled_archives(path: list[str], importer_cache: dict) -> None:
    """Take the bundled archives off `path`, and their zip importers out of `importer_cache`: the interpreter made
    those while finding this module, and invalidate_caches reaches every importer in the cache, on the path or not."""
    kept = without_bundled_archives(path)
    for entry in set(path) - set(kept):
        importer_cache.pop(entry, None)
    path[:] = kept


if __name__ == "__main__":
    drop_bundled_archives(sys.path, sys.path_importer_cache)
    importlib.invalidate_caches()
    from pyspark import daemon

    daemon.manager()
