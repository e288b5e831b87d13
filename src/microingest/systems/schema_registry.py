"""Writer schemas from a Confluent-compatible schema registry, fetched by id once per process and kept.

A schema id is immutable in the registry, so a schema once fetched never needs fetching again: executors keep one
client per registry setting for their lifetime (pyspark reuses its Python workers), and a batch fetches each writer
schema once. An id the registry says it does not know (404 with error code 40403, "schema not found") is a fact
about the record (its producer wrote garbage or used another registry); any other answer, or none, is a fact about
now and fails the batch for a retry, so no good record becomes a dead letter because a registry was away.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from microingest.errors import Refused, Transient

SCHEMA_NOT_FOUND = 40403  # the registry API's error code for an id it does not hold
SUBJECT_OR_VERSION_NOT_FOUND = (40401, 40402)
_CLIENTS: dict[tuple, Any] = {}
_SCHEMAS: dict[tuple, Any] = {}


class SchemaRegistryUnavailableError(Transient):
    pass


class UnreadableSchemaError(Refused):
    """The registry holds the writer schema, but in a form microingest cannot read: not the record's fault, so no
    dead letter; the batch fails, saying what to change."""


class UnknownSchemaError(LookupError):
    """The registry does not know this id: the record's own problem, a dead letter."""


def shown_url(url: str) -> str:
    """The registry's URL for messages: without the user and password a URL may carry."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def _client(config: dict[str, str]):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    key = tuple(sorted(config.items()))  # two credentials for one URL are two clients
    if key not in _CLIENTS:
        # Few retries: a Spark task waiting on the registry holds up its whole batch, which a retry redoes anyway.
        # A subject's latest version is kept by whoever asks for it (registry_schema), for as long as it decides.
        _CLIENTS[key] = SchemaRegistryClient({**config, "timeout": 10, "max.retries": 1, "cache.latest.ttl.sec": 1})
    return _CLIENTS[key]


def writer_schema(config: dict[str, str], schema_id: int, fmt: str | None = None):
    """The registered schema of `schema_id` (a confluent_kafka Schema: schema_str, schema_type, references), in the
    registry's format `fmt` (Protobuf: "serialized", a descriptor rather than .proto text)."""
    key = (config["url"], config.get("basic.auth.user.info"), schema_id, fmt)  # looked up for every record: no sort
    if key not in _SCHEMAS:
        found = _asked(
            config, f"schema id {schema_id}", lambda c: c.get_schema(schema_id, fmt=fmt), (SCHEMA_NOT_FOUND,)
        )
        if found is None:
            raise UnknownSchemaError(f"schema id {schema_id} is not in the registry")
        _SCHEMAS[key] = found
    return _SCHEMAS[key]


def subject_version(config: dict[str, str], subject: str, version: int | str):
    """The RegisteredSchema (schema_id, schema, subject, version) of a subject's version, or of its latest; asked
    every time (the caller keeps what it derives from it)."""
    what = f"subject {subject} version {version}"
    if version == "latest":
        found = _asked(config, what, lambda c: c.get_latest_version(subject), SUBJECT_OR_VERSION_NOT_FOUND)
    else:
        found = _asked(config, what, lambda c: c.get_version(subject, version), SUBJECT_OR_VERSION_NOT_FOUND)
    if found is None:
        raise UnreadableSchemaError(f"the registry does not hold {what}")
    return found


def subject_schemas(config: dict[str, str], subject: str, newest: int) -> list[tuple[int, Any]]:
    """(schema id, Schema) of a subject's `newest` versions, oldest first; none when the registry has no such
    subject."""
    versions = _asked(config, f"subject {subject}'s versions", lambda c: c.get_versions(subject), (40401,)) or []
    found = [subject_version(config, subject, version) for version in sorted(versions)[-newest:]]
    return [(registered.schema_id, registered.schema) for registered in found]


def subjects(config: dict[str, str]) -> list[str]:
    """The registry's subjects: the cheapest question that proves it answers with these credentials."""
    return _asked(config, "its subjects", lambda c: c.get_subjects(), ()) or []


def referenced_schema(config: dict[str, str], subject: str, version: int):
    """The Schema a writer schema refers to by subject and version. One the registry does not hold makes the
    referring schema unreadable: the record is not at fault."""
    key = (config["url"], config.get("basic.auth.user.info"), subject, version)
    if key not in _SCHEMAS:
        try:
            _SCHEMAS[key] = subject_version(config, subject, version).schema
        except UnreadableSchemaError as exc:
            raise UnreadableSchemaError(f"{exc}, which a writer schema refers to") from None
    return _SCHEMAS[key]


def _asked(config: dict[str, str], what: str, call, not_found: tuple[int, ...]):
    """The registry's answer to `call(client)`: None on 404 with one of the `not_found` error codes, any other
    failure transient."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    where = shown_url(config["url"])
    try:
        return call(_client(config))
    except SchemaRegistryError as exc:
        if exc.http_status_code == 404 and exc.error_code in not_found:
            return None
        raise SchemaRegistryUnavailableError(
            f"schema registry at {where} answered {exc.http_status_code} (error code {exc.error_code}) for "
            f"{what}: {exc.error_message}"
        ) from None
    except Exception as exc:  # refused, timed out, unknown host: the registry is away, not the record wrong
        detail = str(exc).replace(config["url"], where)
        raise SchemaRegistryUnavailableError(
            f"schema registry at {where} is unreachable: {type(exc).__name__}: {detail}"
        ) from None
