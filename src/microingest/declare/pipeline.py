"""What a pipeline declaration says, once validated: the `Pipeline` and its parts, and the vocabulary they use.

A declaration is data, not code. `declare.model` says what each of its fields may hold, `declare.validate` turns one
into a `Pipeline`; `declare.files` finds and reads the files of the pipelines folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Literal, get_args

from microingest.declare.identifiers import is_topic_name
from microingest.declare.lag_policy import LagPolicy, OnRecords
from microingest.errors import Refused

# Each choice a declaration makes: the Literal types the declaration's model checks, and their values in order.
FieldType = Literal[
    "string", "integer", "double", "boolean", "timestamp", "decimal", "date", "uuid", "bytes", "json", "array"
]
ItemType = Literal["string", "integer", "double", "boolean", "timestamp", "date", "decimal", "uuid"]  # an array's
Rounding = Literal["half_even"]
# Where a field's value comes from: the record's value (decoded by value_format), its key (as key_format reads it),
# or one of its headers.
FieldSource = Literal["value", "key", "header"]
StartPosition = Literal["earliest", "latest"]
# The registry formats are Confluent-framed: magic byte 0, the writer schema's id, the payload.
RegistryFormat = Literal["avro", "protobuf", "json_schema"]
ValueFormat = Literal["json", RegistryFormat]
KeyFormat = Literal["string", RegistryFormat]
SinkMode = Literal["append", "upsert_latest", "aggregate"]
GapPolicy = Literal["fail", "skip"]
RecreatedTopicPolicy = Literal["fail", "restart"]
CheckFailure = Literal["refuse", "dead_letter"]  # a batch-level check refuses the batch, a record-level one the record
MaskMethod = Literal["sha256", "hmac_sha256", "redact", "truncate_24"]

FIELD_TYPES: tuple[str, ...] = get_args(FieldType)
ITEM_TYPES: tuple[str, ...] = get_args(ItemType)
ROUNDINGS: tuple[str, ...] = get_args(Rounding)
FIELD_SOURCES: tuple[str, ...] = get_args(FieldSource)
RECORD_TYPES = ("string", "bytes")  # the types a key or header field may be
# The types every decoder reads (the whole-batch ones and the JVM's too); the others only the reference reads.
FLAT_TYPES = ("string", "integer", "double", "boolean", "timestamp")
# Postgres numeric's binary form in COPY goes through Arrow's decimal128, which holds 38 digits.
MAX_DECIMAL_PRECISION = 38
START_POSITIONS: tuple[str, ...] = get_args(StartPosition)
REGISTRY_FORMATS: tuple[str, ...] = get_args(RegistryFormat)
VALUE_FORMATS: tuple[str, ...] = get_args(ValueFormat)
KEY_FORMATS: tuple[str, ...] = get_args(KeyFormat)
SINK_MODES: tuple[str, ...] = get_args(SinkMode)
GAP_POLICIES: tuple[str, ...] = get_args(GapPolicy)
RECREATED_TOPIC_POLICIES: tuple[str, ...] = get_args(RecreatedTopicPolicy)
CHECK_FAILURES: tuple[str, ...] = get_args(CheckFailure)
MASK_METHODS: tuple[str, ...] = get_args(MaskMethod)
MEASURES = ("count", "sum")


class DeclarationError(Refused, ValueError):
    """A pipeline declaration is malformed; the message names the source and the field."""

    def __init__(self, source: str, field: str, problem: str):
        self.source, self.field, self.problem = source, field, problem
        super().__init__(f"{source}: field '{field}': {problem}")


@dataclass(frozen=True)
class Field:
    """A declared field: the target column `name`, of `type`, found in the record's value at `path`."""

    name: str
    type: str
    required: bool = False
    precision: int | None = None  # a decimal (or an array of decimals): digits in all
    scale: int | None = None  # of those, digits after the point
    rounding: str | None = None  # a decimal with more digits after the point: None refuses it, half_even rounds it
    items: str | None = None  # an array's items' type
    path: tuple[str, ...] = ()  # the names (and array indexes) leading to it in the value; () for its own name
    source: str = "value"  # value | key | header
    header: str | None = None  # the header a header field takes

    @property
    def at(self) -> tuple[str, ...]:
        """Where the value holds it."""
        return self.path or (self.name,)

    @property
    def flat(self) -> bool:
        """Read by every decoder: one of the flat types, at the value's top level under its own name."""
        return self.type in FLAT_TYPES and self.at == (self.name,) and self.source == "value"

    @property
    def kind(self) -> str:
        """Its scalar type: an array's items', else its own."""
        return self.items or "" if self.type == "array" else self.type

    def shown(self) -> str:
        """Its type as messages name it: decimal(12,2), array of string."""
        kind = self.kind
        if kind == "decimal":
            kind = f"decimal({self.precision},{self.scale})"
        return f"array of {kind}" if self.type == "array" else kind

    def declared(self) -> dict:
        """The field as a declaration writes it (defaults left out but type and required)."""
        written = {"type": self.type, "required": self.required}
        extra = {"precision": self.precision, "scale": self.scale, "rounding": self.rounding, "items": self.items}
        written.update({key: value for key, value in extra.items() if value is not None})
        if self.path:
            written["path"] = ".".join(self.path)
        if self.source != "value":
            written["from"] = self.source
        if self.header is not None:
            written["name"] = self.header
        return written


@dataclass(frozen=True)
class DeadLetterPolicy:
    """A batch fails (commits nothing) when its bad records exceed either limit; None means no limit."""

    max_records: int | None = None
    max_fraction: float | None = 0.1

    def exceeded(self, bad: int, total: int) -> str | None:
        if self.max_records is not None and bad > self.max_records:
            return f"{bad} bad records exceed dead_letter.max_records {self.max_records}"
        if self.max_fraction is not None and total and bad / total > self.max_fraction:
            return (
                f"{bad} of {total} records bad ({bad / total:.1%}) exceeds dead_letter.max_fraction {self.max_fraction}"
            )
        return None


@dataclass(frozen=True)
class Check:
    """A condition, in Spark SQL, the rows of a batch meet before it commits: over the whole batch (an aggregate;
    `on_fail: refuse` refuses the batch) or over each row (`on_fail: dead_letter` makes a failing record a dead
    letter). `declare.sql_statement.check_condition` holds each to its kind."""

    condition: str
    on_fail: str

    @property
    def per_record(self) -> bool:
        return self.on_fail == "dead_letter"


@dataclass(frozen=True)
class Measure:
    name: str
    function: str  # count | sum
    field: str | None = None

    @property
    def summed(self) -> str:
        """The field a sum adds up (validation requires one for every sum)."""
        if self.field is None:
            raise ValueError(f"measure {self.name} ({self.function}) sums no field")
        return self.field


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
class PartitionBy:
    """A target partitioned by time: by a required timestamp field or the Kafka timestamp, one partition per
    `interval` ('1 day'), partitions older than `retain` ('90 days') dropped."""

    field: str  # a declared timestamp field, or kafka_timestamp
    interval: str
    retain: str | None = None


ON_RECORDS = "on_records"  # the schedule of a pipeline woken by records
DAG_ID_PREFIX = "microingest_"  # a pipeline's DAG is this and its name


@dataclass(frozen=True)
class Pipeline:
    name: str
    # The topics it reads: those named (`topic:` or `topics:`), or every topic whose whole name `topic_pattern`
    # matches (the plan lists them).
    topics: tuple[str, ...]
    target_table: str
    schema: tuple[Field, ...]
    kafka_conn_id: str = "microingest_kafka"
    postgres_conn_id: str = "microingest_postgres"
    spark_conn_id: str = "microingest_spark"
    schema_registry_conn_id: str = "microingest_schema_registry"
    value_format: str = "json"
    key_format: str = "string"
    sink_mode: str = "append"
    max_records_per_batch: int = 100_000
    max_records_per_run: int = 1_000_000
    max_run_seconds: int = 1800
    schedule: str | None = None
    start_from: str = "earliest"
    description: str = ""
    max_value_bytes: int = 1_048_576
    transform: str | None = None
    # A SELECT over the decoded batch, run in Spark before the rows leave the executors (`declare.sql_statement`).
    transform_sql: str | None = None
    checks: tuple[Check, ...] = ()
    # Declared text fields masked on the driver before they are written (`decode.masks`); a keyed hash's key is
    # the password of the Airflow connection `mask_conn_id`.
    mask: tuple[tuple[str, str], ...] = ()
    mask_conn_id: str | None = None
    dead_letter: DeadLetterPolicy = DeadLetterPolicy()
    aggregate: Aggregate | None = None
    partition_by: PartitionBy | None = None
    on_retention_gap: str = "fail"
    on_topic_recreated: str = "fail"  # the topic's Kafka id changed: refuse, or start it again from start_from
    topic_pattern: str | None = None
    retries: int = 3
    retry_delay_seconds: int = 30
    max_active_runs: int = 1
    lag: LagPolicy = LagPolicy()
    on_records: OnRecords = OnRecords()  # thresholds of schedule: on_records
    source: str = dataclass_field(default="", compare=False)  # the file it was read from; not a declaration field

    def reads_topic(self, topic: str) -> bool:
        """Whether `topic` is one of the pipeline's: named, or matched whole by its pattern (never a name no Kafka
        topic can have, as a restarted topic's old records are kept under: `commit.restart`)."""
        if self.topic_pattern is None:
            return topic in self.topics
        return is_topic_name(topic) and re.fullmatch(self.topic_pattern, topic) is not None

    def topic_asked(self, topic: str | None) -> str:
        """The topic a question about one partition means: the one named, else the pipeline's only topic.
        ValueError when it reads no such topic, or several and none is named."""
        if topic is not None:
            if not self.reads_topic(topic):
                raise ValueError(f"pipeline {self.name} does not read topic {topic} ({self.sources_named})")
            return topic
        if self.topic_pattern is not None or len(self.topics) != 1:
            raise ValueError(f"pipeline {self.name} reads {self.sources_named}: say which topic")
        return self.topics[0]

    @property
    def sources_named(self) -> str:
        """Its topics as a message names them."""
        if self.topic_pattern is not None:
            return f"topics matching '{self.topic_pattern}'"
        return f"topic {self.topics[0]}" if len(self.topics) == 1 else f"topics {', '.join(self.topics)}"

    @property
    def rows_in_spark(self) -> bool:
        """Its rows pass through Spark SQL (a statement, checks or masks) before they are written
        (`spark.sql_transform`), not straight from the decoder to COPY."""
        return self.transform_sql is not None or bool(self.checks) or bool(self.mask)

    @property
    def redrive_refusal(self) -> str | None:
        """Why its dead letters cannot be redriven, else None. Judged by the planner and again by the job with the
        declaration it decodes with, so a statement, check or mask added after the plan never lets rows land
        untransformed, unchecked or unmasked."""
        if not self.rows_in_spark:
            return None
        # A redrive decodes in the job's own process, without Spark SQL.
        return (
            f"pipeline {self.name} has a transform_sql, checks or masks, which redrives do not run yet: its dead "
            "letters stay where they are"
        )

    @property
    def woken_by_records(self) -> bool:
        """Runs started by the triggerer when records wait (Airflow's event-driven scheduling), not by a clock."""
        return self.schedule == ON_RECORDS

    @property
    def reads_registry(self) -> bool:
        """Its values, or its keys, name their writer schema by registry id."""
        return self.value_format in REGISTRY_FORMATS or self.key_format in REGISTRY_FORMATS

    @property
    def dag_id(self) -> str:
        return f"{DAG_ID_PREFIX}{self.name}"

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.schema)

    @property
    def value_fields(self) -> tuple[Field, ...]:
        """The declared fields the record's value holds (the others come from its key or headers)."""
        return tuple(f for f in self.schema if f.source == "value")

    @property
    def aggregate_spec(self) -> Aggregate:
        """The `aggregate:` section of a pipeline in sink mode aggregate (validation requires it there)."""
        if self.aggregate is None:
            raise ValueError(f"pipeline {self.name} declares no aggregate (sink_mode {self.sink_mode})")
        return self.aggregate

    def field(self, name: str) -> Field:
        return next(f for f in self.schema if f.name == name)
