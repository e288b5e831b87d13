"""A pipeline declaration as pydantic models: what each field may hold, and what it must agree with, in the words of
whoever writes the YAML. `validate` runs them on a parsed file and makes the result a `Pipeline`.

Values are taken strictly as YAML gives them: no 5 for "5", no true for 1. Our own words are ValueErrors, raised by
the validators here (or the name checks of `identifiers`); where pydantic objects to a value itself, `_says` puts it
in ours. Pydantic's structural errors (a field missing or unknown, lag sections that are not mappings) are worded
by `validate`.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Callable
from datetime import date, datetime
from typing import Annotated, Any, ClassVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
    field_validator,
    model_validator,
)

from microingest.declare.identifiers import (
    check_field_name,
    check_identifier,
    check_pipeline_name,
    check_target_table,
    check_topic,
)
from microingest.declare.lag_policy import GatePolicy, OnRecords, SlaPolicy
from microingest.declare.pipeline import (
    CHECK_FAILURES,
    FIELD_SOURCES,
    FIELD_TYPES,
    GAP_POLICIES,
    ITEM_TYPES,
    KEY_FORMATS,
    MASK_METHODS,
    MAX_DECIMAL_PRECISION,
    ON_RECORDS,
    RECORD_TYPES,
    RECREATED_TOPIC_POLICIES,
    ROUNDINGS,
    SINK_MODES,
    START_POSITIONS,
    VALUE_FORMATS,
    Check,
    CheckFailure,
    DeadLetterPolicy,
    FieldSource,
    FieldType,
    GapPolicy,
    ItemType,
    KeyFormat,
    MaskMethod,
    Pipeline,
    RecreatedTopicPolicy,
    Rounding,
    SinkMode,
    StartPosition,
    ValueFormat,
)
from microingest.declare.sql_statement import StatementError, check_condition, check_statement, internal
from microingest.declare.time_intervals import NAME_SUFFIX_MAX, Interval, duration_seconds, retention

_PATH = re.compile(r"^[^.\s]+(\.[^.\s]+)*$")
_TRANSFORM = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_INTERVAL = re.compile(r"^[1-9]\d{0,5} (second|minute|hour|day)s?$")
_PRESETS = ("@hourly", "@daily", "@weekly", "@monthly", "@yearly")
_CRON_OR_PRESET = re.compile(rf"^({'|'.join(_PRESETS)}|(\S+\s+){{4}}\S+)$")
# Every *_seconds value becomes a timedelta, added to now, where all pipelines are served together (the DAG file, the
# lag page): an absurd one would overflow there and take the other pipelines down with it.
MAX_SECONDS = 3650 * 24 * 3600

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


def _says(problem: str, got: Callable[[Any], str] | None = _shown) -> WrapValidator:
    """Pydantic's objections to the annotated value become `problem`, followed by the value as `got` shows it. What
    our own validators say within it (a ValueError: pydantic's value_error) stands."""

    def wrap(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError as exc:
            if all(error["type"] == "value_error" for error in exc.errors()):
                raise
            raise ValueError(problem if got is None else f"{problem}, got {got(value)}") from None

    return WrapValidator(wrap)


def _one_of(choices: tuple[str, ...]) -> WrapValidator:
    return _says(f"must be one of {', '.join(choices)}")


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"must be text, got {_kind(value)}")
    return value


def _topic_pattern(pattern: str) -> str:
    """A pattern of Kafka topic names, matched whole by Python's re (Kafka Connect's topics.regex is Java's: the
    common syntax agrees)."""
    if not pattern:
        raise ValueError("must be a regular expression matching topic names, got nothing")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"{_shown(pattern)} is not a valid regular expression: {exc}") from None
    return pattern


def _distinct(topics: list[str]) -> list[str]:
    repeated = sorted({t for t in topics if topics.count(t) > 1})
    if repeated:
        raise ValueError(f"names {', '.join(repeated)} more than once")
    return topics


def _at_most_ten_years(seconds: int) -> int:
    if seconds > MAX_SECONDS:
        raise ValueError(f"must be at most {MAX_SECONDS:,} (ten years), got {seconds}")
    return seconds


def _interval(text: str) -> str:
    Interval.parse(text)
    return text


def _retention(text: str) -> str:
    retention(text)
    return text


def _schedule(schedule: str) -> str:
    """Checked as Airflow's timetable and the lag page will read it: a schedule they cannot use would break the DAG
    file and the lag page for every pipeline."""
    from croniter import CroniterBadDateError, croniter

    schedule = schedule.strip()
    if schedule == ON_RECORDS:
        return schedule
    if not _CRON_OR_PRESET.match(schedule):
        raise ValueError(
            f"must be a cron expression, @preset ({', '.join(_PRESETS)}) or {ON_RECORDS}, got {_shown(schedule)}"
        )
    try:
        croniter(schedule, datetime(2026, 1, 1)).get_next(datetime)
    except CroniterBadDateError:
        raise ValueError(f"{_shown(schedule)} never fires") from None
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{_shown(schedule)} is not a valid cron expression: {exc}") from None
    return schedule


def _fault(loc: tuple[str, ...], problem: str) -> ValidationError:
    """A problem found beyond the value at hand (across fields, in keys), placed at the field to change."""
    return ValidationError.from_exception_data(
        "Declaration", [{"type": "value_error", "loc": loc, "input": None, "ctx": {"error": ValueError(problem)}}]
    )


_TEXT = BeforeValidator(_text)
Positive = Annotated[int, Field(ge=1), _says("must be a positive integer")]
AtLeastOne = Annotated[int, Field(ge=1), _says("must be an integer >= 1")]
AtLeastZero = Annotated[int, Field(ge=0), _says("must be an integer >= 0")]
PositiveSeconds = Annotated[Positive, AfterValidator(_at_most_ten_years)]
_DURATION_TEXT = "must be seconds or look like '6h', '90 minutes' or '2 days'"
Duration = Annotated[int, BeforeValidator(duration_seconds), AfterValidator(_at_most_ten_years), _says(_DURATION_TEXT)]
ConnId = Annotated[str, _TEXT, AfterValidator(check_identifier)]
Topic = Annotated[str, _TEXT, AfterValidator(check_topic)]
# The topics a pipeline reads: exactly one of these three.
TOPIC_FIELDS = ("topic", "topics", "topic_pattern")


class _Strict(BaseModel):
    # Patterns match as Python's re does (its $ also matches before a final newline), as they did before pydantic.
    model_config = ConfigDict(strict=True, extra="forbid", regex_engine="python-re")


class _Section(_Strict):
    """A mapping that is wrong as a whole when it is not one, has a field it does not know or lacks one it needs:
    `problem` says what it must be."""

    problem: ClassVar[str]

    @model_validator(mode="before")
    @classmethod
    def _whole(cls, data: Any) -> Any:
        data = cls._written(data)
        fields = {field.alias or name: field for name, field in cls.model_fields.items()}
        needed = {name for name, field in fields.items() if field.is_required()}
        if not isinstance(data, dict) or not needed <= data.keys() <= fields.keys():
            raise ValueError(cls.problem)
        return data

    @classmethod
    def _written(cls, data: Any) -> Any:
        """The section as the model reads it, from what the YAML may write in short."""
        return data


class FieldSpec(_Section):
    problem = (
        "must be a type name or a mapping with 'type' (or 'from') and optional required, precision, scale, rounding, "
        "items, path, name"
    )

    type: Annotated[FieldType, _one_of(FIELD_TYPES)]
    required: Annotated[bool, _says("must be true or false")] = False
    precision: (
        Annotated[
            int,
            Field(ge=1, le=MAX_DECIMAL_PRECISION),
            _says(f"must be an integer from 1 to {MAX_DECIMAL_PRECISION} (digits in all)"),
        ]
        | None
    ) = None
    scale: (
        Annotated[int, Field(ge=0, le=MAX_DECIMAL_PRECISION), _says("must be an integer >= 0 (digits after the point)")]
        | None
    ) = None
    rounding: Annotated[Rounding, _one_of(ROUNDINGS)] | None = None
    items: Annotated[ItemType, _one_of(ITEM_TYPES)] | None = None
    path: (
        Annotated[
            str,
            _TEXT,
            Field(pattern=_PATH),
            _says("must be names (or array indexes) joined by dots, such as customer.id or items.0.sku"),
        ]
        | None
    ) = None

    from_: Annotated[FieldSource, _TEXT, _one_of(FIELD_SOURCES)] = Field("value", alias="from")
    name: Annotated[str, _TEXT, Field(min_length=1), _says("must be a header's name (text)")] | None = None

    @classmethod
    def _written(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"type": data}
        if isinstance(data, dict) and data.get("from", "value") != "value":
            return {"type": "string", **data}  # a key or a header is text unless declared bytes
        # A type left out is not among the types: said as such, at 'type'.
        return {"type": None, **data} if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _from_the_record(self) -> FieldSpec:
        if self.from_ == "value":
            if self.name is not None:
                raise ValueError("name only applies to a field from: header (the header's name)")
            return self
        if self.type not in RECORD_TYPES:
            raise ValueError(f"a field from the record's {self.from_} is string or bytes, not {self.type}")
        if self.path is not None:
            raise ValueError(f"path only applies to a field of the record's value, not its {self.from_}")
        if (self.from_ == "header") != (self.name is not None):
            raise ValueError(
                "a field from: header needs name: the header's name"
                if self.from_ == "header"
                else "name only applies to a field from: header (the header's name)"
            )
        return self

    @model_validator(mode="after")
    def _parts_agree(self) -> FieldSpec:
        kind = self.items if self.type == "array" else self.type
        if self.type == "array" and self.items is None:
            raise ValueError("an array needs items: the type of its elements (" + ", ".join(ITEM_TYPES) + ")")
        if self.type != "array" and self.items is not None:
            raise ValueError(f"items only applies to type array, not {self.type}")
        if kind == "decimal":
            if self.precision is None:
                raise ValueError("a decimal needs precision (digits in all) and scale (digits after the point)")
            if (self.scale or 0) > self.precision:
                raise ValueError(f"scale {self.scale} is more than precision {self.precision}")
            if self.scale is None:
                self.scale = 0
        else:
            for name in ("precision", "scale", "rounding"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} only applies to a decimal (or an array of decimals), not {kind}")
        return self


class DeadLetter(_Section):
    problem = "must be a mapping with max_records and/or max_fraction"

    max_records: AtLeastZero | None = DeadLetterPolicy.max_records
    max_fraction: Annotated[float, Field(ge=0, le=1), _says("must be a number from 0 to 1")] | None = (
        DeadLetterPolicy.max_fraction
    )


class TimeBucket(_Section):
    problem = "must be a mapping with field and width"

    field: Annotated[str, _says("must be a field name (text)", got=_kind)]
    width: Annotated[str, Field(pattern=_INTERVAL), _says("must look like '15 minutes' or '1 hour'")]


class MeasureSpec(_Strict):
    """`count`, or `{sum: <numeric field>}`."""

    count: bool = False  # written as the word count; no declaration writes the key
    sum: Annotated[str, _says("must name a numeric field of the schema (text)", got=_kind)] = ""

    @model_validator(mode="before")
    @classmethod
    def _count_or_sum(cls, data: Any) -> Any:
        if data == "count":
            return {"count": True}
        if not isinstance(data, dict) or list(data) != ["sum"]:
            raise ValueError(f"must be count or {{sum: <numeric field>}}, got {_shown(data)}")
        return data


class AggregateSpec(_Section):
    problem = "must be a mapping with group_by, measures and optional time_bucket"

    time_bucket: TimeBucket | None = None
    group_by: Annotated[list[str], _says("must be a list of schema field names", got=_kind)] | None = None
    measures: Annotated[
        dict[Annotated[str, AfterValidator(check_identifier)], MeasureSpec],
        Field(min_length=1),
        _says("must map measure column names to count or {sum: field}", got=None),
    ] = Field(default_factory=dict, validate_default=True)

    def check_against(self, schema: dict[str, FieldSpec]) -> None:
        """The schema's fields it names: a required timestamp to bucket by, required fields to group by, numeric
        fields to sum; and no column twice."""
        bucket, group_by = self.time_bucket, self.group_by or []
        if bucket is not None:
            spec = schema.get(bucket.field)
            if spec is None or spec.type != "timestamp" or not spec.required:
                raise _fault(
                    ("aggregate", "time_bucket", "field"),
                    f"{_shown(bucket.field)} must be a required timestamp field of the schema",
                )
        for i, name in enumerate(group_by):
            if name not in schema or not schema[name].required:
                raise _fault(("aggregate", "group_by"), f"'{name}' must be a required field of the schema")
            if name in group_by[:i]:
                raise _fault(("aggregate", "group_by"), f"'{name}' is listed twice")
            if bucket is not None and name == "bucket_start":
                raise _fault(
                    ("aggregate", "group_by"), "'bucket_start' clashes with the time bucket's column; rename the field"
                )
        if not group_by and bucket is None:
            raise _fault(("aggregate", "group_by"), "give group_by fields, a time_bucket, or both")
        for name, measure in self.measures.items():
            if name in group_by or name == "bucket_start":
                raise _fault(("aggregate", "measures", name), "clashes with a group column")
            summed = schema.get(measure.sum)
            if not measure.count and (summed is None or summed.type not in ("integer", "double")):
                raise _fault(
                    ("aggregate", "measures", name, "sum"),
                    f"{_shown(measure.sum)} must be an integer or double field of the schema",
                )


class PartitionSpec(_Section):
    problem = "must be a mapping with field, interval and optional retain"

    field: Annotated[str, _says("must be a timestamp field's name or kafka_timestamp (text)", got=_kind)]
    interval: Annotated[str, _TEXT, AfterValidator(_interval)]
    retain: Annotated[str, _TEXT, AfterValidator(_retention)] | None = None

    def check_against(self, schema: dict[str, FieldSpec], sink_mode: str, table: str) -> None:
        if sink_mode != "append":
            raise _fault(
                ("partition_by",),
                f"only applies to sink_mode append, not {sink_mode}: Postgres needs the partition's time in every "
                "unique key, so a key (or group) whose time changed would have a row in each partition",
            )
        spec = schema.get(self.field)
        if self.field != "kafka_timestamp" and (
            spec is None or spec.type != "timestamp" or not spec.required or spec.from_ != "value"
        ):
            raise _fault(
                ("partition_by", "field"),
                f"{_shown(self.field)} must be kafka_timestamp or a required timestamp field of the schema "
                "(the partition's time is part of the table's primary key, which holds no NULL)",
            )
        name = table.rsplit(".", 1)[-1]
        if len(name) + NAME_SUFFIX_MAX > 63:
            raise _fault(
                ("partition_by",),
                f"the target's name {name!r} is too long for its partitions' names (at most "
                f"{63 - NAME_SUFFIX_MAX} characters with partition_by)",
            )


class Gate(_Strict):
    min_records: Positive
    max_wait_seconds: PositiveSeconds
    wait_seconds: PositiveSeconds = GatePolicy.wait_seconds
    poke_seconds: PositiveSeconds = GatePolicy.poke_seconds


class Sla(_Strict):
    max_time_lag_seconds: PositiveSeconds
    grace_seconds: PositiveSeconds = SlaPolicy.grace_seconds
    fail_at_risk: Annotated[bool, _says("must be true or false")] = SlaPolicy.fail_at_risk


class Wake(_Strict):
    min_records: Positive = OnRecords.min_records
    max_wait_seconds: PositiveSeconds = OnRecords.max_wait_seconds
    poke_seconds: PositiveSeconds = OnRecords.poke_seconds


class Lag(_Strict):
    gate: Gate | None = None
    sla: Sla | None = None
    window_seconds: PositiveSeconds | None = None
    retention_margin: Duration | None = None


def _a_list_of_checks(value: Any) -> Any:
    if not isinstance(value, list):
        raise ValueError(f"must be a list of checks ({{sql: ..., on_fail: ...}} each), got {_kind(value)}")
    return value


class CheckSpec(_Strict):
    """`{sql: <condition>, on_fail: ...}`, or `{field: <name>, not_null: true, on_fail: ...}`."""

    sql: Annotated[str, _TEXT] | None = None
    field: Annotated[str, _TEXT] | None = None
    not_null: bool | None = None
    on_fail: Annotated[CheckFailure, _TEXT, _one_of(CHECK_FAILURES)]

    @model_validator(mode="after")
    def _one_form(self) -> CheckSpec:
        if (self.sql is None) == (self.field is None):
            raise ValueError("a check gives sql (a condition) or field (with not_null: true), one of them")
        if self.field is not None and self.not_null is not True:
            raise ValueError("a check of a field says not_null: true")
        if self.sql is not None and self.not_null is not None:
            raise ValueError("not_null only applies to a check of a field")
        return self

    def check(self) -> Check:
        if self.sql is not None:
            return Check(self.sql, self.on_fail)
        if self.on_fail == "dead_letter":
            return Check(f"`{self.field}` IS NOT NULL", self.on_fail)
        return Check(f"count_if(`{self.field}` IS NULL) = 0", self.on_fail)


class Declaration(_Strict):
    """One pipeline's declaration. Its fields are Pipeline's (but `source`), with the same defaults, in the order a
    malformed one is reported."""

    name: Annotated[str, _TEXT, AfterValidator(check_pipeline_name)]
    topic: Topic | None = None
    topics: (
        Annotated[
            list[Topic],
            Field(min_length=1),
            _says("must be a non-empty list of topic names", got=None),
            AfterValidator(_distinct),
        ]
        | None
    ) = None
    topic_pattern: Annotated[str, _TEXT, AfterValidator(_topic_pattern)] | None = None
    target_table: Annotated[str, _TEXT, AfterValidator(check_target_table)]
    schema_: Annotated[
        dict[Annotated[str, AfterValidator(check_field_name)], FieldSpec],
        Field(min_length=1),
        _says("must be a non-empty mapping of field name to type", got=None),
    ] = Field(alias="schema")  # BaseModel has a schema() of its own
    kafka_conn_id: ConnId = Pipeline.kafka_conn_id
    postgres_conn_id: ConnId = Pipeline.postgres_conn_id
    spark_conn_id: ConnId = Pipeline.spark_conn_id
    schema_registry_conn_id: ConnId = Pipeline.schema_registry_conn_id
    value_format: Annotated[ValueFormat, _TEXT, _one_of(VALUE_FORMATS)] = "json"
    key_format: Annotated[KeyFormat, _TEXT, _one_of(KEY_FORMATS)] = "string"
    sink_mode: Annotated[SinkMode, _TEXT, _one_of(SINK_MODES)] = "append"
    start_from: Annotated[StartPosition, _TEXT, _one_of(START_POSITIONS)] = "earliest"
    max_records_per_batch: Positive = Pipeline.max_records_per_batch
    max_records_per_run: Positive = Pipeline.max_records_per_run
    max_run_seconds: PositiveSeconds = Pipeline.max_run_seconds
    schedule: Annotated[str, _TEXT, AfterValidator(_schedule)] | None = Pipeline.schedule
    description: Annotated[str, _TEXT] = Pipeline.description
    on_retention_gap: Annotated[GapPolicy, _TEXT, _one_of(GAP_POLICIES)] = "fail"
    on_topic_recreated: Annotated[RecreatedTopicPolicy, _TEXT, _one_of(RECREATED_TOPIC_POLICIES)] = "fail"
    max_value_bytes: AtLeastOne = Pipeline.max_value_bytes
    retries: AtLeastZero = Pipeline.retries
    retry_delay_seconds: Annotated[AtLeastZero, AfterValidator(_at_most_ten_years)] = Pipeline.retry_delay_seconds
    max_active_runs: AtLeastOne = Pipeline.max_active_runs
    transform: Annotated[str, _TEXT, Field(pattern=_TRANSFORM), _says("must be 'package.module:function'")] | None = (
        Pipeline.transform
    )
    transform_sql: Annotated[str, _TEXT] | None = Pipeline.transform_sql
    checks: Annotated[list[CheckSpec], BeforeValidator(_a_list_of_checks)] | None = None
    mask: (
        Annotated[
            dict[str, Annotated[MaskMethod, _TEXT, _one_of(MASK_METHODS)]],
            _says("must be a mapping of field name to a mask", got=_kind),
        ]
        | None
    ) = None
    mask_conn_id: ConnId | None = Pipeline.mask_conn_id
    dead_letter: DeadLetter | None = None  # Pipeline's DeadLetterPolicy()
    lag: Lag | None = None  # Pipeline's LagPolicy()
    on_records: Wake | None = None  # Pipeline's OnRecords()
    aggregate: AggregateSpec | None = Field(None, validate_default=True)
    partition_by: PartitionSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _a_mapping_named_in_text(cls, raw: Any) -> Any:
        required = [field.alias or name for name, field in cls.model_fields.items() if field.is_required()]
        if raw is None:
            raise ValueError(f"the file is empty; declare at least {', '.join(required)} and one of {_TOPICS_NAMED}")
        if not isinstance(raw, dict):
            raise ValueError(f"expected a mapping of fields, got {_kind(raw)}")
        _check_keys(raw)
        # A required field left empty is reported as left out.
        return {key: value for key, value in raw.items() if not (key in required and value in (None, ""))}

    @field_validator("aggregate", mode="before")
    @classmethod
    def _with_sink_mode_aggregate(cls, aggregate: Any, info: ValidationInfo) -> Any:
        mode = info.data.get("sink_mode", "append")  # absent if itself malformed: reported first
        if mode == "aggregate" and aggregate is None:
            raise ValueError("is required when sink_mode is aggregate")
        if mode != "aggregate" and aggregate is not None:
            raise ValueError(f"only applies to sink_mode aggregate, not {mode}")
        return aggregate

    @model_validator(mode="after")
    def _fields_agree(self) -> Declaration:
        declared = [name for name in TOPIC_FIELDS if getattr(self, name) is not None]
        if len(declared) != 1:
            raise _fault(
                (declared[-1] if declared else "topic",),
                f"declare exactly one of {_TOPICS_NAMED}"
                + (f", not {' and '.join(declared)}" if declared else ": which topics does the pipeline read?"),
            )
        if self.transform_sql is not None:
            try:
                check_statement(self.transform_sql, tuple(self.schema_))
            except StatementError as exc:
                raise _fault(("transform_sql",), str(exc)) from None
        self._checks_and_masks_agree()
        if self.aggregate is not None:
            self.aggregate.check_against(self.schema_)
        if self.partition_by is not None:
            self.partition_by.check_against(self.schema_, self.sink_mode, self.target_table)
        if self.on_records is not None and self.schedule != ON_RECORDS:
            raise _fault(("on_records",), f"only applies to schedule: {ON_RECORDS}, not {self.schedule}")
        lag = self.lag
        if lag is not None and lag.gate is not None and self.schedule == ON_RECORDS:
            raise _fault(("lag", "gate"), f"gates scheduled runs; with schedule: {ON_RECORDS} use on_records' own")
        if lag is not None and lag.sla is not None and lag.sla.fail_at_risk and lag.retention_margin is None:
            raise _fault(("lag", "sla", "fail_at_risk"), "needs lag.retention_margin: AT_RISK is measured against it")
        reads_keys = self.sink_mode == "upsert_latest" or any(f.from_ == "key" for f in self.schema_.values())
        if self.key_format != "string" and not reads_keys:
            raise _fault(
                ("key_format",),
                f"only applies where keys are read: sink_mode upsert_latest or a field from: key, not {self.sink_mode} "
                "without one",
            )
        return self

    def _checks_and_masks_agree(self) -> None:
        fields = tuple(self.schema_)
        if self.transform_sql is not None or self.checks or self.mask:
            taken = [name for name in fields if internal(name)]
            if taken:
                raise _fault(
                    ("schema", taken[0]),
                    f"'{taken[0]}' is reserved where rows pass through Spark SQL (transform_sql, checks, mask): the "
                    "platform's own column there; name the field otherwise",
                )
        for i, spec in enumerate(self.checks or ()):
            if spec.field is not None and spec.field not in self.schema_:
                raise _fault(("checks", str(i), "field"), f"names {spec.field}, which is no field of the schema")
            check = spec.check()
            try:
                check_condition(check.condition, check.per_record, fields)
            except StatementError as exc:
                raise _fault(("checks", str(i), "sql"), str(exc)) from None
        masks = self.mask or {}
        for name in masks:
            field = self.schema_.get(name)
            if field is None or field.type != "string":
                what = "no field of the schema" if field is None else f"a {field.type} field"
                raise _fault(("mask", name), f"masks text fields only; {name} is {what}")
            if field.from_ == "key" and self.sink_mode == "upsert_latest":
                raise _fault(
                    ("mask", name),
                    f"{name} is the record key, which upsert_latest keeps as it is (each row's record_key): an "
                    "upsert cannot mask its key",
                )
        keyed = "hmac_sha256" in masks.values()
        if keyed and self.mask_conn_id is None:
            raise _fault(("mask_conn_id",), "is required by hmac_sha256: the connection whose password is the key")
        if self.mask_conn_id is not None and not keyed:
            raise _fault(("mask_conn_id",), "only applies to a mask of hmac_sha256 (the key's connection)")


_TOPICS_NAMED = "topic, topics or topic_pattern"


def _check_keys(raw: dict) -> None:
    """Every key of every mapping is text, checked before any field: YAML makes 1, yes or ~ a number, a boolean or
    null, rarely what was meant, and pydantic would say neither the key as written nor the fix. Each container is
    visited once: YAML aliases can share and even nest a node inside itself."""
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
                raise _fault((path,), _key_problem(key))
            if isinstance(value, (dict, list)):
                pending.append((path, value))


def _spelled(key: Any) -> str:
    return "null" if key is None else str(key).lower() if isinstance(key, bool) else str(key)


def _key_problem(key: Any) -> str:
    what = _kind(key)
    if isinstance(key, bool):
        what = what[:-1] + ": YAML reads unquoted yes, no, on, off, true and false so)"
    return f"names must be text, got {what}; put the name in quotes"
