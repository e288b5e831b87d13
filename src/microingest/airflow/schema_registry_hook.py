"""The schema registry as an Airflow connection type of its own (`schema_registry`), so the UI offers its form and
its Test button asks the registry itself. The pipelines read the same connection through microingest.systems."""

from __future__ import annotations

from urllib.parse import urlsplit

from airflow.sdk import BaseHook

from microingest.systems.connections import get_connection, schema_registry_config
from microingest.systems.schema_registry import shown_url, subjects


class SchemaRegistryHook(BaseHook):
    conn_name_attr = "schema_registry_conn_id"
    default_conn_name = "microingest_schema_registry"
    conn_type = "schema_registry"
    hook_name = "Schema Registry (Confluent-compatible)"

    def __init__(self, schema_registry_conn_id: str = default_conn_name):
        super().__init__()
        self.schema_registry_conn_id = schema_registry_conn_id

    def config(self) -> dict[str, str]:
        """confluent_kafka SchemaRegistryClient settings of the connection (credentials included: not for logs)."""
        return schema_registry_config(get_connection(self.schema_registry_conn_id))

    def test_connection(self) -> tuple[bool, str]:
        try:
            conn = get_connection(self.schema_registry_conn_id)
            config = schema_registry_config(conn)
            asked = urlsplit(config["url"])
            # Airflow's Test reuses the saved password when host and port are unchanged: a URL in the extra naming
            # another server would carry it there.
            if (asked.hostname, asked.port) != (conn.host or None, conn.port):
                return False, (
                    f"the extra's url names {shown_url(config['url'])}, not the connection's host and port; "
                    "set host and port to the registry's (the url may add its path)"
                )
            count = len(subjects(config))
        except Exception as exc:  # the UI's Test button shows the reason instead of an error page
            return False, str(exc)
        return True, f"schema registry at {shown_url(config['url'])} answered: {count} subjects"
