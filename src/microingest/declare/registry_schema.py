"""`schema: {from_registry: {subject: ..., version: latest | N}}`: a declaration's fields derived from a registered
schema (by `derived_fields`), fetched when the declaration is loaded.

The subject's version "latest" is looked up again at most once a minute per process, so a new version's fields reach
the pipeline (and its target, by an added column) without a redeploy; a version number never changes. A registry that
does not answer makes that declaration fail to load, alone, naming the registry: pin a version, or paste the output of
`microingest schema PIPELINE` into the declaration, for a pipeline that must not depend on the registry to be served.
"""

from __future__ import annotations

import json
import time
from typing import Any

from microingest.declare.derived_fields import Derived, avro_fields, json_schema_fields, protobuf_fields
from microingest.declare.pipeline import DeclarationError
from microingest.systems.connections import get_connection, schema_registry_config
from microingest.systems.protobuf_schemas import writer_file
from microingest.systems.schema_registry import shown_url, subject_version

LATEST_SECONDS = 60
_DERIVED: dict[tuple, tuple[float, Derived, str]] = {}


def from_registry(raw: Any) -> dict | None:
    """The `from_registry` mapping a declaration's schema names, if it names one."""
    schema = raw.get("schema") if isinstance(raw, dict) else None
    if isinstance(schema, dict) and set(schema) == {"from_registry"}:
        return schema["from_registry"]
    return None


def resolved(raw: dict, source: str) -> dict:
    """The declaration with its `from_registry` schema replaced by the fields derived from the registered schema."""
    where = "schema.from_registry"
    spec = from_registry(raw)
    if not isinstance(spec, dict) or set(spec) - {"subject", "version"} or not isinstance(spec.get("subject"), str):
        raise DeclarationError(
            source,
            where,
            "must be a mapping with subject (text) and optional version (latest, the default, or a number)",
        )
    version = spec.get("version", "latest")
    if version != "latest" and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise DeclarationError(source, f"{where}.version", f"must be latest or a positive number, got {version!r}")
    conn_id = raw.get("schema_registry_conn_id", "microingest_schema_registry")
    try:
        derived, _ = derive(conn_id, spec["subject"], version)
    except Exception as exc:  # the registry away, the subject unknown, a schema with no fields: this file alone fails
        raise DeclarationError(source, where, f"subject {spec['subject']} version {version}: {exc}") from None
    if not derived.fields:
        raise DeclarationError(
            source,
            where,
            f"subject {spec['subject']} version {version} has no field a "
            f"declared type can hold (left out: {derived.left_out})",
        )
    return {**raw, "schema": derived.fields}


def derive(conn_id: str, subject: str, version: int | str) -> tuple[Derived, str]:
    """(the fields, a description of the registered schema they come from: subject, version, id, where)."""

    config = schema_registry_config(get_connection(conn_id))
    key = (config["url"], config.get("basic.auth.user.info"), subject, version)
    cached = _DERIVED.get(key)
    if cached is None or (version == "latest" and time.monotonic() - cached[0] > LATEST_SECONDS):
        registered = subject_version(config, subject, version)
        derived = _fields(registered.schema, config, registered.schema_id)
        origin = (
            f"subject {subject} version {registered.version} (schema id {registered.schema_id}) at "
            f"{shown_url(config['url'])}"
        )
        _DERIVED[key] = cached = (time.monotonic(), derived, origin)
    return cached[1], cached[2]


def _fields(schema, config: dict[str, str], schema_id: int) -> Derived:
    kind = schema.schema_type or "AVRO"
    if kind == "AVRO":
        return avro_fields(json.loads(schema.schema_str))
    if kind == "JSON":
        return json_schema_fields(json.loads(schema.schema_str))
    # A Protobuf schema's fields come from its file descriptor as the decoder builds it (imports resolved through the
    # registry).
    return protobuf_fields(writer_file(config, schema_id, schema)[1])
