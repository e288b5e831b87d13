"""Pipeline declarations: YAML files in the pipelines folder, validated into `Pipeline` objects.

A declaration is data, not code. Every error names the file and the offending field so an operator can fix the
declaration without reading this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from microingest import settings
from microingest.identifiers import IdentifierError, check_identifier, check_topic, split_table_name

FIELD_TYPES = ("string", "integer", "double", "boolean", "timestamp")
START_POSITIONS = ("earliest", "latest")
VALUE_FORMATS = ("json",)
SINK_MODES = ("append",)
_CRON_OR_PRESET = re.compile(r"^(@(once|hourly|daily|weekly|monthly|yearly)|(\S+\s+){4}\S+)$")
# Columns every target row carries besides the declared value fields.
SOURCE_COLUMNS = ("source_topic", "source_partition", "source_offset", "kafka_timestamp", "batch_id")


class DeclarationError(ValueError):
    """A pipeline declaration is malformed; the message names the source and the field."""

    def __init__(self, source: str, field: str, problem: str):
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: field '{field}': {problem}")


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    required: bool = False


@dataclass(frozen=True)
class Pipeline:
    name: str
    topic: str
    target_table: str
    schema: tuple[Field, ...]
    kafka_conn_id: str = "microingest_kafka"
    postgres_conn_id: str = "microingest_postgres"
    spark_conn_id: str = "microingest_spark"
    value_format: str = "json"
    sink_mode: str = "append"
    max_records_per_batch: int = 10_000
    schedule: str | None = None
    start_from: str = "earliest"
    description: str = ""

    @property
    def dag_id(self) -> str:
        return f"microingest_{self.name}"

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.schema)

    @property
    def target_columns(self) -> tuple[str, ...]:
        return SOURCE_COLUMNS + self.value_columns

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "topic": self.topic,
            "target_table": self.target_table,
            "schema": {f.name: {"type": f.type, "required": f.required} for f in self.schema},
            "kafka_conn_id": self.kafka_conn_id,
            "postgres_conn_id": self.postgres_conn_id,
            "spark_conn_id": self.spark_conn_id,
            "value_format": self.value_format,
            "sink_mode": self.sink_mode,
            "max_records_per_batch": self.max_records_per_batch,
            "schedule": self.schedule,
            "start_from": self.start_from,
            "description": self.description,
        }


_REQUIRED = ("name", "topic", "target_table", "schema")
_KNOWN = set(Pipeline.__dataclass_fields__)


def parse_pipeline(raw: Any, source: str = "<declaration>") -> Pipeline:
    """Validate one declaration (already parsed from YAML) and return the pipeline it declares."""
    if not isinstance(raw, dict):
        raise DeclarationError(source, "<root>", f"expected a mapping of fields, got {type(raw).__name__}")
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise DeclarationError(source, unknown[0], f"unknown field (known: {', '.join(sorted(_KNOWN))})")
    for key in _REQUIRED:
        if raw.get(key) in (None, ""):
            raise DeclarationError(source, key, "is required")

    def text(key: str) -> str:
        value = raw[key]
        if not isinstance(value, str):
            raise DeclarationError(source, key, f"must be a string, got {type(value).__name__}")
        return value

    def checked(key: str, check) -> str:
        try:
            return check(text(key))
        except IdentifierError as exc:
            raise DeclarationError(source, key, str(exc)) from None

    def choice(key: str, allowed: tuple[str, ...]) -> str:
        value = text(key)
        if value not in allowed:
            raise DeclarationError(source, key, f"must be one of {', '.join(allowed)}, got {value!r}")
        return value

    fields: dict[str, Any] = {
        "name": checked("name", check_identifier),
        "topic": checked("topic", check_topic),
        "target_table": checked("target_table", lambda v: ".".join(split_table_name(v))),
        "schema": _parse_schema(raw["schema"], source),
    }
    for key in ("kafka_conn_id", "postgres_conn_id", "spark_conn_id"):
        if key in raw:
            fields[key] = checked(key, check_identifier)
    if "value_format" in raw:
        fields["value_format"] = choice("value_format", VALUE_FORMATS)
    if "sink_mode" in raw:
        fields["sink_mode"] = choice("sink_mode", SINK_MODES)
    if "start_from" in raw:
        fields["start_from"] = choice("start_from", START_POSITIONS)
    if "max_records_per_batch" in raw:
        cap = raw["max_records_per_batch"]
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise DeclarationError(source, "max_records_per_batch", f"must be a positive integer, got {cap!r}")
        fields["max_records_per_batch"] = cap
    if raw.get("schedule") is not None:
        schedule = text("schedule").strip()
        if not _CRON_OR_PRESET.match(schedule):
            raise DeclarationError(source, "schedule", f"must be a cron expression or @preset, got {schedule!r}")
        fields["schedule"] = schedule
    if "description" in raw:
        fields["description"] = text("description")
    return Pipeline(**fields)


def _parse_schema(raw: Any, source: str) -> tuple[Field, ...]:
    if not isinstance(raw, dict) or not raw:
        raise DeclarationError(source, "schema", "must be a non-empty mapping of field name to type")
    fields = []
    for name, spec in raw.items():
        where = f"schema.{name}"
        try:
            check_identifier(str(name))
        except IdentifierError as exc:
            raise DeclarationError(source, where, str(exc)) from None
        if name in SOURCE_COLUMNS:
            raise DeclarationError(source, where, f"'{name}' is reserved for the source position of each row")
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict) or set(spec) - {"type", "required"}:
            raise DeclarationError(source, where, "must be a type name or a mapping with 'type' and 'required'")
        if spec.get("type") not in FIELD_TYPES:
            raise DeclarationError(source, f"{where}.type", f"must be one of {', '.join(FIELD_TYPES)}, got {spec.get('type')!r}")
        required = spec.get("required", False)
        if not isinstance(required, bool):
            raise DeclarationError(source, f"{where}.required", f"must be true or false, got {required!r}")
        fields.append(Field(str(name), spec["type"], required))
    return tuple(fields)


def load_pipeline_file(path: Path) -> Pipeline:
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise DeclarationError(str(path), "<yaml>", f"not valid YAML: {exc}") from None
    pipeline = parse_pipeline(raw, str(path))
    if path.stem != pipeline.name:
        raise DeclarationError(str(path), "name", f"must match the file name '{path.stem}', got '{pipeline.name}'")
    return pipeline


def load_pipelines(folder: Path | None = None) -> list[Pipeline]:
    """All declarations in the folder (default: settings.pipelines_dir()), sorted by name."""
    folder = folder or settings.pipelines_dir()
    return [load_pipeline_file(p) for p in sorted(folder.glob("*.y*ml"))]


def get_pipeline(name: str, folder: Path | None = None) -> Pipeline:
    folder = folder or settings.pipelines_dir()
    for suffix in (".yaml", ".yml"):
        path = folder / f"{name}{suffix}"
        if path.exists():
            return load_pipeline_file(path)
    raise DeclarationError(str(folder), "name", f"no declaration for pipeline '{name}'")
