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
from microingest.lag.policy import LagPolicy, PolicyError, parse_lag_policy

FIELD_TYPES = ("string", "integer", "double", "boolean", "timestamp")
START_POSITIONS = ("earliest", "latest")
VALUE_FORMATS = ("json",)
SINK_MODES = ("append", "upsert_latest", "aggregate")
GAP_POLICIES = ("fail", "skip")
MEASURES = ("count", "sum")
_TRANSFORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_INTERVAL = re.compile(r"^[1-9]\d{0,5} (second|minute|hour|day)s?$")
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
class DeadLetterPolicy:
    """A batch fails (commits nothing) when its bad records exceed either limit; None means no limit."""

    max_records: int | None = None
    max_fraction: float | None = 0.1

    def exceeded(self, bad: int, total: int) -> str | None:
        if self.max_records is not None and bad > self.max_records:
            return f"{bad} bad records exceed dead_letter.max_records {self.max_records}"
        if self.max_fraction is not None and total and bad / total > self.max_fraction:
            return f"{bad} of {total} records bad ({bad / total:.1%}) exceeds dead_letter.max_fraction {self.max_fraction}"
        return None


@dataclass(frozen=True)
class Measure:
    name: str
    function: str  # count | sum
    field: str | None = None


@dataclass(frozen=True)
class Aggregate:
    """Additive aggregate: per group (and time bucket) counts and sums, added onto the target's existing rows."""

    group_by: tuple[str, ...]
    measures: tuple[Measure, ...]
    bucket_field: str | None = None
    bucket_width: str | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        return self.group_by + (("bucket_start",) if self.bucket_field else ())


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
    max_records_per_run: int = 1_000_000
    max_run_seconds: int = 1800
    schedule: str | None = None
    start_from: str = "earliest"
    description: str = ""
    max_value_bytes: int = 1_048_576
    transform: str | None = None
    dead_letter: DeadLetterPolicy = DeadLetterPolicy()
    aggregate: Aggregate | None = None
    on_retention_gap: str = "fail"
    retries: int = 3
    retry_delay_seconds: int = 30
    max_active_runs: int = 1
    lag: LagPolicy = LagPolicy()

    @property
    def dag_id(self) -> str:
        return f"microingest_{self.name}"

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.schema)

    def field(self, name: str) -> Field:
        return next(f for f in self.schema if f.name == name)


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
        "name": checked("name", check_pipeline_name),
        "topic": checked("topic", check_topic),
        "target_table": checked("target_table", check_target_table),
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
    for key in ("max_records_per_batch", "max_records_per_run", "max_run_seconds"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DeclarationError(source, key, f"must be a positive integer, got {value!r}")
            fields[key] = value
    if raw.get("schedule") is not None:
        schedule = text("schedule").strip()
        if not _CRON_OR_PRESET.match(schedule):
            raise DeclarationError(source, "schedule", f"must be a cron expression or @preset, got {schedule!r}")
        fields["schedule"] = schedule
    if "description" in raw:
        fields["description"] = text("description")
    if "on_retention_gap" in raw:
        fields["on_retention_gap"] = choice("on_retention_gap", GAP_POLICIES)
    for key, minimum in (("max_value_bytes", 1), ("retries", 0), ("retry_delay_seconds", 0), ("max_active_runs", 1)):
        if key in raw:
            fields[key] = _integer(source, key, raw[key], minimum)
    if raw.get("transform") is not None:
        if not _TRANSFORM.match(text("transform")):
            raise DeclarationError(source, "transform", f"must be 'package.module:function', got {raw['transform']!r}")
        fields["transform"] = raw["transform"]
    if raw.get("dead_letter") is not None:
        fields["dead_letter"] = _parse_dead_letter(raw["dead_letter"], source)
    if raw.get("lag") is not None:
        try:
            fields["lag"] = parse_lag_policy(raw["lag"])
        except PolicyError as exc:
            raise DeclarationError(source, exc.field, str(exc)) from None
    mode = fields.get("sink_mode", "append")
    if mode == "aggregate":
        if raw.get("aggregate") is None:
            raise DeclarationError(source, "aggregate", "is required when sink_mode is aggregate")
        fields["aggregate"] = _parse_aggregate(raw["aggregate"], fields["schema"], source)
    elif raw.get("aggregate") is not None:
        raise DeclarationError(source, "aggregate", f"only applies to sink_mode aggregate, not {mode}")
    return Pipeline(**fields)


# Postgres objects the platform derives from a pipeline's name; the longest suffix bounds the name's length.
PLATFORM_SCHEMAS = ("microingest", "microingest_staging")
RESERVED_PIPELINE_NAMES = ("dead_letters", "lag_sla")  # staging's own table; the lag SLA DAG's id
_DERIVED_NAME_SUFFIX = "_position"  # the staging table's unique index
MAX_PIPELINE_NAME = 63 - len(_DERIVED_NAME_SUFFIX)


def check_pipeline_name(name: str) -> str:
    check_identifier(name)
    if len(name) > MAX_PIPELINE_NAME:
        raise IdentifierError(f"{name!r} is {len(name)} characters; pipeline names may have at most "
                              f"{MAX_PIPELINE_NAME} so that the Postgres objects named after them (staging table "
                              f"and index '<name>{_DERIVED_NAME_SUFFIX}') stay within Postgres' 63-character limit")
    if name in RESERVED_PIPELINE_NAMES:
        raise IdentifierError(f"{name!r} is reserved: the platform's own table microingest_staging.{name} has it")
    return name


def check_target_table(name: str) -> str:
    schema, table = split_table_name(name)
    if schema in PLATFORM_SCHEMAS or schema.startswith("pg_") or schema == "information_schema":
        raise IdentifierError(f"{schema}.{table} is in schema {schema!r}, which belongs to the platform or to "
                              "Postgres itself; put targets in a schema of your own (e.g. public or analytics)")
    return f"{schema}.{table}"


def _integer(source: str, where: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DeclarationError(source, where, f"must be an integer >= {minimum}, got {value!r}")
    return value


def _parse_dead_letter(raw: Any, source: str) -> DeadLetterPolicy:
    if not isinstance(raw, dict) or set(raw) - {"max_records", "max_fraction"}:
        raise DeclarationError(source, "dead_letter", "must be a mapping with max_records and/or max_fraction")
    max_records = raw.get("max_records")
    if max_records is not None:
        max_records = _integer(source, "dead_letter.max_records", max_records, 0)
    max_fraction = raw.get("max_fraction", DeadLetterPolicy.max_fraction)
    if max_fraction is not None and (isinstance(max_fraction, bool) or not isinstance(max_fraction, (int, float))
                                     or not 0 <= max_fraction <= 1):
        raise DeclarationError(source, "dead_letter.max_fraction", f"must be a number from 0 to 1, got {max_fraction!r}")
    return DeadLetterPolicy(max_records, None if max_fraction is None else float(max_fraction))


def _parse_aggregate(raw: Any, schema: tuple[Field, ...], source: str) -> Aggregate:
    if not isinstance(raw, dict) or set(raw) - {"group_by", "time_bucket", "measures"}:
        raise DeclarationError(source, "aggregate", "must be a mapping with group_by, measures and optional time_bucket")
    by_name = {f.name: f for f in schema}
    group_by = raw.get("group_by") or []
    if not isinstance(group_by, list) or not all(isinstance(g, str) for g in group_by):
        raise DeclarationError(source, "aggregate.group_by", "must be a list of schema field names")
    for g in group_by:
        if g not in by_name or not by_name[g].required:
            raise DeclarationError(source, "aggregate.group_by", f"'{g}' must be a required field of the schema")
    bucket_field = bucket_width = None
    if raw.get("time_bucket") is not None:
        tb = raw["time_bucket"]
        if not isinstance(tb, dict) or set(tb) != {"field", "width"}:
            raise DeclarationError(source, "aggregate.time_bucket", "must be a mapping with field and width")
        f = by_name.get(tb["field"])
        if f is None or f.type != "timestamp" or not f.required:
            raise DeclarationError(source, "aggregate.time_bucket.field",
                                   f"{tb['field']!r} must be a required timestamp field of the schema")
        if not isinstance(tb["width"], str) or not _INTERVAL.match(tb["width"]):
            raise DeclarationError(source, "aggregate.time_bucket.width",
                                   f"must look like '15 minutes' or '1 hour', got {tb['width']!r}")
        bucket_field, bucket_width = tb["field"], tb["width"]
    if not group_by and not bucket_field:
        raise DeclarationError(source, "aggregate.group_by", "give group_by fields, a time_bucket, or both")
    measures_raw = raw.get("measures")
    if not isinstance(measures_raw, dict) or not measures_raw:
        raise DeclarationError(source, "aggregate.measures", "must map measure column names to count or {sum: field}")
    measures = []
    for name, spec in measures_raw.items():
        where = f"aggregate.measures.{name}"
        try:
            check_identifier(str(name))
        except IdentifierError as exc:
            raise DeclarationError(source, where, str(exc)) from None
        if name in group_by or name == "bucket_start":
            raise DeclarationError(source, where, "clashes with a group column")
        if spec == "count":
            measures.append(Measure(name, "count"))
        elif isinstance(spec, dict) and list(spec) == ["sum"] and spec["sum"] in by_name \
                and by_name[spec["sum"]].type in ("integer", "double"):
            measures.append(Measure(name, "sum", spec["sum"]))
        else:
            raise DeclarationError(source, where, f"must be count or {{sum: <numeric field>}}, got {spec!r}")
    return Aggregate(tuple(group_by), tuple(measures), bucket_field, bucket_width)


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
    """All declarations in the folder (default: settings.pipelines_dir()), sorted by name; the first malformed one
    raises DeclarationError."""
    pipelines, errors = load_declarations(folder)
    if errors:
        raise errors[0]
    return pipelines


def load_declarations(folder: Path | None = None) -> tuple[list[Pipeline], list[DeclarationError]]:
    """The valid declarations in the folder, and the errors of the malformed ones, each on its own: one broken
    file does not hide the others."""
    folder = folder or settings.pipelines_dir()
    pipelines, errors = [], []
    for path in sorted(folder.glob("*.y*ml")):
        try:
            pipelines.append(load_pipeline_file(path))
        except DeclarationError as exc:
            errors.append(exc)
    return pipelines, errors


def get_pipeline(name: str, folder: Path | None = None) -> Pipeline:
    folder = folder or settings.pipelines_dir()
    for suffix in (".yaml", ".yml"):
        path = folder / f"{name}{suffix}"
        if path.exists():
            return load_pipeline_file(path)
    raise DeclarationError(str(folder), "name", f"no declaration for pipeline '{name}'")
