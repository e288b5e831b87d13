"""What microingest tells Airflow as a provider (the `apache_airflow_provider` entry point in pyproject.toml): its
name and version, its connection type and the configuration section it reads. The plugin (lag page, metrics) comes
through the `airflow.plugins` entry point instead, which Airflow loads without discovering providers first."""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

PACKAGE = "microingest"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE,
        "name": "microingest",
        "description": "Exactly-once batch ingestion of Kafka offset ranges into Postgres, run by Airflow on Spark.",
        "versions": [version(PACKAGE)],
        "integrations": [{"integration-name": "microingest", "tags": ["software"]}],
        "operators": [{"integration-name": "microingest", "python-modules": ["microingest.airflow.operators"]}],
        "sensors": [{"integration-name": "microingest", "python-modules": ["microingest.airflow.lag_sensors"]}],
        "triggers": [{"integration-name": "microingest", "python-modules": ["microingest.airflow.lag_triggers"]}],
        "hooks": [{"integration-name": "microingest", "python-modules": ["microingest.airflow.schema_registry_hook"]}],
        "connection-types": [
            {
                "hook-class-name": "microingest.airflow.schema_registry_hook.SchemaRegistryHook",
                "hook-name": "Schema Registry (Confluent-compatible)",
                "connection-type": "schema_registry",
                "ui-field-behaviour": {
                    "hidden-fields": [],
                    "relabeling": {"schema": "Scheme (http or https)"},
                    "placeholders": {"extra": '{"url": "https://registry.internal:8081"}'},
                },
            }
        ],
        "config": {
            "microingest": {
                "description": "microingest's settings in Airflow's configuration.",
                "options": {
                    "pipelines_dir": {
                        "description": "The folder of pipeline declarations (one YAML file per pipeline) that the "
                        "DAG factory, the lag page and the Spark job read. The environment variable "
                        "MICROINGEST_PIPELINES_DIR, when set, takes precedence.",
                        "version_added": "0.1.0",
                        "type": "string",
                        "example": "/opt/airflow/pipelines",
                        "default": None,
                    }
                },
            }
        },
    }
