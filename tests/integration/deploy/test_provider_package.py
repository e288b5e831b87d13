"""microingest installs into an Airflow as a provider: the built wheel, pip-installed into a fresh virtualenv, is
listed by Airflow as a provider with its connection type, registers its plugin, ships its migrations and Spark job,
and its DAG factory serves the pipelines of the folder Airflow's configuration names."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from microingest.settings import repo_root

REPO = repo_root()
DAG_FILE = REPO / "dags" / "microingest_pipelines.py"

pytestmark = pytest.mark.platform_free  # its Airflow is the fresh virtualenv's, on a database of its own


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: int = 600) -> str:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv[:3]} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    """A virtualenv holding only the wheel and its dependencies (pinned as `make install` pins them), and an Airflow
    home whose configuration names a pipelines folder outside this repository."""
    root = tmp_path_factory.mktemp("provider")
    source = root / "source"  # built from a copy: an in-tree build would leave setuptools' build/ here
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "MICROINGEST", "PYTHON"))}
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(source)], clean, root)
    (wheel,) = (root / "dist").glob("microingest-*.whl")

    venv.create(root / "venv", with_pip=True)
    python = root / "venv" / "bin" / "python"
    # --no-compile: Python compiles what it imports anyway; compiling all of Airflow and pyspark up front is a third of
    # the install's time
    install = ["-m", "pip", "install", "-q", "--no-compile", "-c", str(REPO / "constraints.txt"), str(wheel)]
    run([str(python), *install], clean, root, 1200)

    pipelines, dags = root / "pipelines", root / "dags"
    pipelines.mkdir()
    dags.mkdir()
    shutil.copy(REPO / "pipelines" / "demo_events.yaml", pipelines)
    shutil.copy(DAG_FILE, dags)
    env = {
        **clean,
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__MICROINGEST__PIPELINES_DIR": str(pipelines),
        # A DAG names its target by its Postgres connection; parsing reads the connection, never connects.
        "AIRFLOW_CONN_MICROINGEST_POSTGRES": "postgresql://ingest:secret@warehouse.internal:5432/warehouse",
    }
    return python, env, root


def airflow_json(installed, *command: str):
    python, env, root = installed
    out = run([str(python.parent / "airflow"), *command, "-o", "json"], env, root)
    return json.loads(out[out.index("[") :])  # past any warning Airflow prints first


def test_airflow_lists_microingest_as_a_provider_with_its_connection_type(installed):
    providers = {p["package_name"]: p for p in airflow_json(installed, "providers", "list")}
    assert providers["microingest"]["version"] == "0.1.0"
    hooks = {h["connection_type"]: h for h in airflow_json(installed, "providers", "hooks")}
    assert hooks["schema_registry"]["package_name"] == "microingest"
    assert hooks["schema_registry"]["class"] == "microingest.airflow.schema_registry_hook.SchemaRegistryHook"


def test_the_plugin_registers_the_lag_page_and_metrics(installed):
    plugins = {p["name"]: p for p in airflow_json(installed, "plugins")}
    plugin = plugins["microingest"]
    assert "microingest==0.1.0" in plugin["source"]  # from the package's entry point, not a plugins folder
    assert [app["url_prefix"] for app in plugin["fastapi_apps"]] == ["/microingest"]
    assert [view["href"] for view in plugin["external_views"]] == ["/microingest/lag"]


def test_the_wheel_ships_the_migrations_and_the_spark_job(installed):
    python, env, root = installed
    code = (
        "import json; from microingest import settings; "
        "print(json.dumps([sorted(p.name for p in settings.sql_dir().glob('*.sql')), str(settings.sql_dir()), "
        "settings.spark_job_path().is_file(), settings.spark_log_config().is_file(), str(settings.pipelines_dir())]))"
    )
    migrations, sql_dir, job, log_config, pipelines = json.loads(run([str(python), "-c", code], env, root))
    assert migrations == sorted(p.name for p in (REPO / "sql").glob("*.sql"))
    assert str(root / "venv") in sql_dir
    assert job and log_config
    assert pipelines == env["AIRFLOW__MICROINGEST__PIPELINES_DIR"]


def test_the_dag_factory_serves_the_folder_airflow_configuration_names(installed):
    python, env, root = installed
    code = (
        "import json; from airflow.dag_processing.dagbag import DagBag; "
        "bag = DagBag(); "
        "print(json.dumps([sorted(bag.dag_ids), {k: str(v) for k, v in bag.import_errors.items()}]))"
    )
    out = run([str(python), "-c", code], env, root)
    dag_ids, errors = json.loads(out.strip().splitlines()[-1])
    assert errors == {}
    assert dag_ids == ["microingest_demo_events"]
