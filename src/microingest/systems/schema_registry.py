"""Writer schemas from a Confluent-compatible schema registry, fetched by id once per process and kept.

A schema id is immutable in the registry, so a schema once fetched never needs fetching again: executors keep one
client per registry for their lifetime (pyspark reuses its Python workers), and a batch fetches each writer schema
once. An id the registry does not know is a fact about the record (its producer wrote garbage or used another
registry); a registry that does not answer is a fact about now, and fails the batch for a retry.
"""

from __future__ import annotations

from typing import Any

from microingest.errors import Transient

_CLIENTS: dict[str, Any] = {}
_SCHEMAS: dict[tuple[str, int], Any] = {}


class SchemaRegistryUnavailableError(Transient):
    pass


class UnknownSchemaError(LookupError):
    """The registry does not know this id: the record's own problem, a dead letter."""


def _client(config: dict[str, str]):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    url = config["url"]
    if url not in _CLIENTS:
        _CLIENTS[url] = SchemaRegistryClient({**config, "timeout": 10})
    return _CLIENTS[url]


def writer_schema(config: dict[str, str], schema_id: int):
    """The registered schema of `schema_id` (a confluent_kafka Schema: schema_str, schema_type, references)."""
    key = (config["url"], schema_id)
    if key not in _SCHEMAS:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            _SCHEMAS[key] = _client(config).get_schema(schema_id)
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise UnknownSchemaError(f"schema id {schema_id} is not in the registry") from None
            raise SchemaRegistryUnavailableError(
                f"schema registry at {config['url']} answered {exc.http_status_code} for schema id {schema_id}: "
                f"{exc.error_message}") from None
        except Exception as exc:  # refused, timed out, unknown host: the registry is away, not the record wrong
            raise SchemaRegistryUnavailableError(
                f"schema registry at {config['url']} is unreachable: {type(exc).__name__}: {exc}") from None
    return _SCHEMAS[key]
