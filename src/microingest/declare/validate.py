"""Validate a pipeline declaration (parsed from YAML) into a `Pipeline`. Every error names the file and the
offending field, so an operator can fix the declaration without reading this module.
"""

from __future__ import annotations

import re
import reprlib
from datetime import date, datetime
from typing import Any

from microingest.batches import ROW_LAYOUT
from microingest.declare.identifiers import IdentifierError, check_identifier, check_topic, split_table_name
from microingest.declare.lag_policy import PolicyError, parse_lag_policy
from microingest.declare.pipeline import (
    FIELD_TYPES,
    GAP_POLICIES,
    KEY_FORMATS,
    RECREATED_TOPIC_POLICIES,
    SINK_MODES,
    START_POSITIONS,
    VALUE_FORMATS,
    Aggregate,
    DeadLetterPolicy,
    DeclarationError,
    Field,
    Measure,
    Pipeline,
)

_TRANSFORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_INTERVAL = re.compile(r"^[1-9]\d{0,5} (second|minute|hour|day)s?$")
_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly")
_CRON_OR_PRESET = re.compile(rf"^({'|'.join(_PRESETS)}|(\S+\s+){{4}}\S+)$")
# Every *_seconds value becomes a timedelta, added to now, where all pipelines are served together (the DAG file, the
# lag page): an absurd one would overflow there and take the other pipelines down with it.
MAX_SECONDS = 3650 * 24 * 3600


_REQUIRED = ("name", "topic", "target_table", "schema")
_KNOWN = set(Pipeline.__dataclass_fields__) - {"source"}


def parse_pipeline(raw: Any, source: str = "<declaration>") -> Pipeline:
    """Validate one declaration (already parsed from YAML) and return the pipeline it declares."""
    if raw is None:
        raise DeclarationError(source, "<root>", "the file is empty; declare at least " + ", ".join(_REQUIRED))
    if not isinstance(raw, dict):
        raise DeclarationError(source, "<root>", f"expected a mapping of fields, got {_kind(raw)}")
    _check_keys_and_durations(raw, source)
    unknown = sorted(set(raw) - _KNOWN)
    if unknown:
        raise DeclarationError(source, unknown[0], f"unknown field (known: {', '.join(sorted(_KNOWN))})")
    for key in _REQUIRED:
        if raw.get(key) in (None, ""):
            raise DeclarationError(source, key, "is required")

    def text(key: str) -> str:
        value = raw[key]
        if not isinstance(value, str):
            raise DeclarationError(source, key, f"must be text, got {_kind(value)}")
        return value

    def checked(key: str, check) -> str:
        try:
            return check(text(key))
        except IdentifierError as exc:
            raise DeclarationError(source, key, str(exc)) from None

    def choice(key: str, allowed: tuple[str, ...]) -> str:
        value = text(key)
        if value not in allowed:
            raise DeclarationError(source, key, f"must be one of {', '.join(allowed)}, got {_shown(value)}")
        return value

    fields: dict[str, Any] = {
        "source": source,
        "name": checked("name", check_pipeline_name),
        "topic": checked("topic", check_topic),
        "target_table": checked("target_table", check_target_table),
        "schema": _parse_schema(raw["schema"], source),
    }
    for key in ("kafka_conn_id", "postgres_conn_id", "spark_conn_id", "schema_registry_conn_id"):
        if key in raw:
            fields[key] = checked(key, check_identifier)
    if "value_format" in raw:
        fields["value_format"] = choice("value_format", VALUE_FORMATS)
    if "key_format" in raw:
        fields["key_format"] = choice("key_format", KEY_FORMATS)
    if "sink_mode" in raw:
        fields["sink_mode"] = choice("sink_mode", SINK_MODES)
    if "start_from" in raw:
        fields["start_from"] = choice("start_from", START_POSITIONS)
    for key in ("max_records_per_batch", "max_records_per_run", "max_run_seconds"):
        if key in raw:
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DeclarationError(source, key, f"must be a positive integer, got {_shown(value)}")
            fields[key] = value
    if raw.get("schedule") is not None:
        fields["schedule"] = _parse_schedule(text("schedule"), source)
    if "description" in raw:
        fields["description"] = text("description")
    if "on_retention_gap" in raw:
        fields["on_retention_gap"] = choice("on_retention_gap", GAP_POLICIES)
    if "on_topic_recreated" in raw:
        fields["on_topic_recreated"] = choice("on_topic_recreated", RECREATED_TOPIC_POLICIES)
    for key, minimum in (("max_value_bytes", 1), ("retries", 0), ("retry_delay_seconds", 0), ("max_active_runs", 1)):
        if key in raw:
            fields[key] = _integer(source, key, raw[key], minimum)
    if raw.get("transform") is not None:
        if not _TRANSFORM.match(text("transform")):
            raise DeclarationError(
                source, "transform", f"must be 'package.module:function', got {_shown(raw['transform'])}"
            )
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
    if fields.get("key_format", "string") != "string" and mode != "upsert_latest":
        raise DeclarationError(
            source, "key_format", f"only applies to sink_mode upsert_latest (the only sink that reads keys), not {mode}"
        )
    return Pipeline(**fields)


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlevel = 3


def _shown(value: Any) -> str:
    """A value as it goes into a message: bounded, however large (or alias-expanded) the YAML made it."""
    return _SHOWN.repr(value)


def _kind(value: Any) -> str:
    """What a YAML value is, in the words of the person who wrote the file."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({_shown(value)})"
    if isinstance(value, str):
        return f"text ({_shown(value)})"
    if isinstance(value, (date, datetime)):
        return f"a date ({value})"
    if isinstance(value, list):
        return "a list"
    return "a mapping" if isinstance(value, dict) else f"a {type(value).__name__}"


def _check_keys_and_durations(raw: dict, source: str) -> None:
    """Before any value is used: every key of every mapping is text (YAML makes 1, yes or ~ numbers, booleans and
    null, which break sorting and lookups further on), and no *_seconds value exceeds MAX_SECONDS. Each container
    is visited once: YAML aliases can share and even nest a node inside itself."""
    pending: list[tuple[str, dict | list]] = [("", raw)]
    seen: set[int] = set()
    while pending:
        where, node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, list):
            pending.extend((f"{where}[{i}]", item) for i, item in enumerate(node) if isinstance(item, (dict, list)))
            continue
        for key, value in node.items():
            path = f"{where}.{_spelled(key)}" if where else _spelled(key)
            if not isinstance(key, str):
                raise DeclarationError(source, path, _key_problem(key))
            if key.endswith("_seconds") and isinstance(value, int) and value > MAX_SECONDS:
                raise DeclarationError(source, path, f"must be at most {MAX_SECONDS:,} (ten years), got {value}")
            if isinstance(value, (dict, list)):
                pending.append((path, value))


def _spelled(key: Any) -> str:
    return "null" if key is None else str(key).lower() if isinstance(key, bool) else str(key)


def _key_problem(key: Any) -> str:
    kind = _kind(key)
    if isinstance(key, bool):
        kind = kind[:-1] + ": YAML reads unquoted yes, no, on, off, true and false so)"
    return f"names must be text, got {kind}; put the name in quotes"


def _parse_schedule(schedule: str, source: str) -> str:
    """Checked as Airflow's timetable and the lag page will read it: a schedule they cannot use would break the DAG
    file and the lag page for every pipeline."""
    from croniter import CroniterBadDateError, croniter

    schedule = schedule.strip()
    if not _CRON_OR_PRESET.match(schedule):
        raise DeclarationError(
            source, "schedule", f"must be a cron expression or @preset ({', '.join(_PRESETS)}), got {_shown(schedule)}"
        )
    try:
        croniter(schedule, datetime(2026, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise DeclarationError(source, "schedule", f"{_shown(schedule)} never fires") from None
    except (ValueError, KeyError) as exc:
        raise DeclarationError(
            source, "schedule", f"{_shown(schedule)} is not a valid cron expression: {exc}"
        ) from None
    return schedule


# Postgres objects the platform derives from a pipeline's name; the longest suffix bounds the name's length.
PLATFORM_SCHEMAS = ("microingest", "microingest_staging")
# dead_letters: the platform's table of that name (and, until migration 012, its staged twin); lag_sla: a DAG's id
RESERVED_PIPELINE_NAMES = ("dead_letters", "lag_sla")
_DERIVED_NAME_SUFFIX = "_position"  # the longest suffix a name-derived object takes (a position index)
MAX_PIPELINE_NAME = 63 - len(_DERIVED_NAME_SUFFIX)


def check_pipeline_name(name: str) -> str:
    check_identifier(name)
    if len(name) > MAX_PIPELINE_NAME:
        raise IdentifierError(
            f"{name!r} is {len(name)} characters; pipeline names may have at most "
            f"{MAX_PIPELINE_NAME} so that the Postgres objects named after them (such as "
            f"'<name>{_DERIVED_NAME_SUFFIX}') stay within Postgres' 63-character limit"
        )
    if name in RESERVED_PIPELINE_NAMES:
        raise IdentifierError(f"{name!r} is reserved: the platform's own objects (a table, a DAG) have that name")
    return name


def check_target_table(name: str) -> str:
    schema, table = split_table_name(name)
    if schema in PLATFORM_SCHEMAS or schema.startswith("pg_") or schema == "information_schema":
        raise IdentifierError(
            f"{schema}.{table} is in schema {schema!r}, which belongs to the platform or to "
            "Postgres itself; put targets in a schema of your own (e.g. public or analytics)"
        )
    return f"{schema}.{table}"


def _integer(source: str, where: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DeclarationError(source, where, f"must be an integer >= {minimum}, got {_shown(value)}")
    return value


def _parse_dead_letter(raw: Any, source: str) -> DeadLetterPolicy:
    if not isinstance(raw, dict) or set(raw) - {"max_records", "max_fraction"}:
        raise DeclarationError(source, "dead_letter", "must be a mapping with max_records and/or max_fraction")
    max_records = raw.get("max_records")
    if max_records is not None:
        max_records = _integer(source, "dead_letter.max_records", max_records, 0)
    max_fraction = raw.get("max_fraction", DeadLetterPolicy.max_fraction)
    if max_fraction is not None and (
        isinstance(max_fraction, bool) or not isinstance(max_fraction, (int, float)) or not 0 <= max_fraction <= 1
    ):
        raise DeclarationError(
            source, "dead_letter.max_fraction", f"must be a number from 0 to 1, got {_shown(max_fraction)}"
        )
    return DeadLetterPolicy(max_records, None if max_fraction is None else float(max_fraction))


def _parse_aggregate(raw: Any, schema: tuple[Field, ...], source: str) -> Aggregate:
    if not isinstance(raw, dict) or set(raw) - {"group_by", "time_bucket", "measures"}:
        raise DeclarationError(
            source, "aggregate", "must be a mapping with group_by, measures and optional time_bucket"
        )
    by_name = {f.name: f for f in schema}
    bucket_field, bucket_width = _parse_time_bucket(raw.get("time_bucket"), by_name, source)
    group_by = _parse_group_by(raw.get("group_by"), by_name, bucket_field is not None, source)
    if not group_by and not bucket_field:
        raise DeclarationError(source, "aggregate.group_by", "give group_by fields, a time_bucket, or both")
    measures_raw = raw.get("measures")
    if not isinstance(measures_raw, dict) or not measures_raw:
        raise DeclarationError(source, "aggregate.measures", "must map measure column names to count or {sum: field}")
    measures = tuple(_parse_measure(name, spec, by_name, group_by, source) for name, spec in measures_raw.items())
    return Aggregate(group_by, measures, bucket_field, bucket_width)


def _parse_group_by(raw: Any, by_name: dict[str, Field], bucketed: bool, source: str) -> tuple[str, ...]:
    where = "aggregate.group_by"
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(g, str) for g in raw):
        raise DeclarationError(source, where, f"must be a list of schema field names, got {_kind(raw)}")
    for i, g in enumerate(raw):
        if g not in by_name or not by_name[g].required:
            raise DeclarationError(source, where, f"'{g}' must be a required field of the schema")
        if g in raw[:i]:
            raise DeclarationError(source, where, f"'{g}' is listed twice")
        if bucketed and g == "bucket_start":
            raise DeclarationError(
                source, where, "'bucket_start' clashes with the time bucket's column; rename the field"
            )
    return tuple(raw)


def _parse_time_bucket(raw: Any, by_name: dict[str, Field], source: str) -> tuple[str | None, str | None]:
    if raw is None:
        return None, None
    if not isinstance(raw, dict) or set(raw) != {"field", "width"}:
        raise DeclarationError(source, "aggregate.time_bucket", "must be a mapping with field and width")
    field, width = raw["field"], raw["width"]
    if not isinstance(field, str):
        raise DeclarationError(
            source, "aggregate.time_bucket.field", f"must be a field name (text), got {_kind(field)}"
        )
    f = by_name.get(field)
    if f is None or f.type != "timestamp" or not f.required:
        raise DeclarationError(
            source, "aggregate.time_bucket.field", f"{_shown(field)} must be a required timestamp field of the schema"
        )
    if not isinstance(width, str) or not _INTERVAL.match(width):
        raise DeclarationError(
            source, "aggregate.time_bucket.width", f"must look like '15 minutes' or '1 hour', got {_shown(width)}"
        )
    return field, width


def _parse_measure(name: str, spec: Any, by_name: dict[str, Field], group_by: tuple[str, ...], source: str) -> Measure:
    where = f"aggregate.measures.{name}"
    try:
        check_identifier(name)
    except IdentifierError as exc:
        raise DeclarationError(source, where, str(exc)) from None
    if name in group_by or name == "bucket_start":
        raise DeclarationError(source, where, "clashes with a group column")
    if spec == "count":
        return Measure(name, "count")
    if not isinstance(spec, dict) or list(spec) != ["sum"]:
        raise DeclarationError(source, where, f"must be count or {{sum: <numeric field>}}, got {_shown(spec)}")
    field = spec["sum"]
    if not isinstance(field, str):
        raise DeclarationError(
            source, f"{where}.sum", f"must name a numeric field of the schema (text), got {_kind(field)}"
        )
    if field not in by_name or by_name[field].type not in ("integer", "double"):
        raise DeclarationError(
            source, f"{where}.sum", f"{_shown(field)} must be an integer or double field of the schema"
        )
    return Measure(name, "sum", field)


def _parse_schema(raw: Any, source: str) -> tuple[Field, ...]:
    if not isinstance(raw, dict) or not raw:
        raise DeclarationError(source, "schema", "must be a non-empty mapping of field name to type")
    return tuple(_parse_field(name, spec, source) for name, spec in raw.items())


def _parse_field(name: str, spec: Any, source: str) -> Field:
    where = f"schema.{name}"
    try:
        check_identifier(name)
    except IdentifierError as exc:
        raise DeclarationError(source, where, str(exc)) from None
    holds = {c.name: c.holds for c in ROW_LAYOUT}
    if name in holds:
        raise DeclarationError(
            source,
            where,
            f"'{name}' is reserved: the platform's staging table uses it for {holds[name]}; leave it out of the schema",
        )
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict) or set(spec) - {"type", "required"}:
        raise DeclarationError(source, where, "must be a type name or a mapping with 'type' and 'required'")
    if spec.get("type") not in FIELD_TYPES:
        raise DeclarationError(
            source, f"{where}.type", f"must be one of {', '.join(FIELD_TYPES)}, got {_shown(spec.get('type'))}"
        )
    required = spec.get("required", False)
    if not isinstance(required, bool):
        raise DeclarationError(source, f"{where}.required", f"must be true or false, got {_shown(required)}")
    return Field(name, spec["type"], required)
