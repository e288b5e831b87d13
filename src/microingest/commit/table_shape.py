"""The target table a declaration asks for, and how an existing table compares with it (no I/O here: the catalog
reads and the DDL are in `target_tables`).

The declaration owns its target's shape: the source position, the declared fields with their Postgres types, and
what the sink mode needs (`record_key` and its key for upsert_latest, the groups' key and the measures for
aggregate). An existing table is compared column by column, and each difference gets one verdict:

- add:    a declared field the table lacks: it becomes a nullable column (rows already there keep NULL);
- refuse: rows could not be written, or written wrongly (a column missing that cannot be added afterwards, a type
          that cannot hold the field's values, NOT NULL where the declaration allows no value, a key that is not the
          sink's); the advice says what to do instead;
- widen:  a decimal column of fewer digits before or after the point than declared: its type is widened (every
          value it holds is kept exactly); a narrower declaration is refused, for rows there may not fit;
- note:   harmless (a wider type, a column the declaration does not write but that accepts NULL).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from psycopg2 import sql

from microingest.declare.identifiers import identifier_list, split_table_name
from microingest.declare.pipeline import Field, Pipeline

# Postgres types as format_type() spells them, the form the catalog reports them in (and DDL takes).
FIELD_TYPES = {
    "string": "text",
    "integer": "bigint",
    "double": "double precision",
    "boolean": "boolean",
    "timestamp": "timestamp with time zone",
    "date": "date",
    "uuid": "uuid",
    "bytes": "bytea",
    "json": "jsonb",
}
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")
# For each type a column is declared with, the types that hold every one of its values unchanged.
HOLDS = {
    "text": {"text", "character varying"},
    "bigint": {"bigint", "numeric"},
    "integer": {"integer", "bigint", "numeric"},
    "double precision": {"double precision"},
    "boolean": {"boolean"},
    "timestamp with time zone": {"timestamp with time zone"},
    "uuid": {"uuid"},
    "date": {"date"},
    "bytea": {"bytea"},
    "jsonb": {"jsonb"},
}
_POSITION = (
    ("source_topic", "text", True),
    ("source_partition", "integer", True),
    ("source_offset", "bigint", True),
    ("kafka_timestamp", "timestamp with time zone", False),
    ("batch_id", "uuid", True),
)
_NEW_TABLE = "point target_table at a new table (microingest creates it) and backfill it from the topic"


def pg_type(field: Field) -> str:
    """The Postgres column type of a declared field."""
    kind = field.kind
    name = f"numeric({field.precision},{field.scale})" if kind == "decimal" else FIELD_TYPES[kind]
    return f"{name}[]" if field.type == "array" else name


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    not_null: bool = False
    role: str = "value"  # position | key | value | measure | bookkeeping (made with new tables, not required after)
    default: str | None = None

    def ddl(self) -> str:
        return self.type + (" NOT NULL" if self.not_null else "") + (f" DEFAULT {self.default}" if self.default else "")


@dataclass(frozen=True)
class TableShape:
    """What a declaration wants its target to be."""

    table: str
    sink_mode: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    key_required: bool  # the sink's ON CONFLICT names it: without it every batch fails
    position_index: tuple[str, ...] = ()  # a plain index on the source position, when the key is not on it
    partition_column: str | None = None  # partitioned by range of this column's time (then in the key too)

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class ExistingColumn:
    name: str
    type: str
    not_null: bool
    has_default: bool

    def shown(self) -> str:
        return self.type + (" NOT NULL" if self.not_null else "") + (" with a default" if self.has_default else "")


@dataclass(frozen=True)
class ExistingTable:
    """A table as the catalog describes it: its columns in order and the column sets of its unique keys (those
    ON CONFLICT can use: not partial, no expressions)."""

    columns: tuple[ExistingColumn, ...]
    unique_keys: tuple[frozenset[str], ...] = ()
    partition_key: str | None = None  # the strategy and the columns, unquoted: RANGE (event_time)

    def column(self, name: str) -> ExistingColumn | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True)
class Difference:
    column: str
    found: str | None  # None: the table lacks the column
    wanted: str
    verdict: str  # add | refuse | note
    advice: str

    def __str__(self) -> str:
        found = "missing" if self.found is None else f"found {self.found}"
        return f"{self.column}: {found}, wanted {self.wanted}: {self.advice}"


@dataclass(frozen=True)
class Comparison:
    shape: TableShape
    differences: tuple[Difference, ...] = field(default=())

    def _with(self, verdict: str) -> tuple[Difference, ...]:
        return tuple(d for d in self.differences if d.verdict == verdict)

    @property
    def additions(self) -> tuple[Column, ...]:
        return tuple(c for d in self._with("add") if (c := self.shape.column(d.column)) is not None)

    @property
    def refusals(self) -> tuple[Difference, ...]:
        return self._with("refuse")

    @property
    def notes(self) -> tuple[Difference, ...]:
        return self._with("note")

    @property
    def widenings(self) -> tuple[Column, ...]:
        return tuple(c for d in self._with("widen") if (c := self.shape.column(d.column)) is not None)

    @property
    def retyped(self) -> tuple[Difference, ...]:
        """Declared columns the table has with another type that holds every value (numeric for bigint, say)."""
        return tuple(d for d in self.notes if (c := self.shape.column(d.column)) is not None and d.wanted == c.type)


def declared_shape(pipeline: Pipeline) -> TableShape:
    """The table a declaration asks for, by sink mode."""
    values = tuple(Column(f.name, pg_type(f), f.required) for f in pipeline.schema)
    position = tuple(Column(name, type_, not_null, "position") for name, type_, not_null in _POSITION)
    stamp = Column("ingested_at", "timestamp with time zone", True, "bookkeeping", "now()")
    if pipeline.sink_mode == "append":
        # Postgres puts a partitioned table's time in its primary key, which holds no NULL.
        by = None if pipeline.partition_by is None else pipeline.partition_by.field
        if by == "kafka_timestamp":
            position = tuple(replace(c, not_null=True) if c.name == by else c for c in position)
        return TableShape(
            pipeline.target_table,
            "append",
            position + values + (stamp,),
            key=("source_topic", "source_partition", "source_offset") + ((by,) if by else ()),
            key_required=False,
            partition_column=by,
        )
    if pipeline.sink_mode == "upsert_latest":
        # The position index serves backfills: overlap looks replayed positions up in the target.
        return TableShape(
            pipeline.target_table,
            "upsert_latest",
            (Column("record_key", "text", True, "key"),) + position + values + (stamp,),
            key=("record_key",),
            key_required=True,
            position_index=("source_partition", "source_offset", "source_topic"),
        )
    spec = pipeline.aggregate_spec
    groups = tuple(Column(g, pg_type(pipeline.field(g)), True, "key") for g in spec.group_by)
    bucket = (Column("bucket_start", "timestamp with time zone", True, "key"),) if spec.bucket_field else ()
    measures = tuple(
        Column(m.name, "bigint" if m.function == "count" else pg_type(pipeline.field(m.summed)), True, "measure")
        for m in spec.measures
    )
    return TableShape(
        pipeline.target_table, "aggregate", groups + bucket + measures, key=spec.key_columns, key_required=True
    )


def compare(shape: TableShape, existing: ExistingTable) -> Comparison:
    """Each difference between the declared shape and an existing table, with its verdict."""
    table, differences = shape.table, []
    for wanted in shape.columns:
        found = existing.column(wanted.name)
        if found is None:
            differences += _missing(shape, wanted)
            continue
        if _NUMERIC.fullmatch(wanted.type) and found.type != wanted.type:
            differences.append(_decimal(table, wanted, found))
        elif found.type not in HOLDS.get(wanted.type, {wanted.type}):
            differences.append(
                Difference(
                    wanted.name,
                    found.type,
                    wanted.type,
                    "refuse",
                    f"{found.type} cannot hold every {wanted.type} value the pipeline writes there; widen it "
                    f"(ALTER TABLE {table} ALTER COLUMN {wanted.name} TYPE {wanted.type}) or {_NEW_TABLE}",
                )
            )
        elif found.type != wanted.type:
            differences.append(
                Difference(
                    wanted.name,
                    found.type,
                    wanted.type,
                    "note",
                    f"{found.type} holds every {wanted.type} value: kept as it is",
                )
            )
        if found.not_null and not wanted.not_null:
            differences.append(
                Difference(
                    wanted.name,
                    found.shown(),
                    wanted.ddl(),
                    "refuse",
                    f"records may lack field {wanted.name} (it is not required), and the table would refuse their "
                    f"rows; declare it required, or ALTER TABLE {table} ALTER COLUMN {wanted.name} DROP NOT NULL",
                )
            )
    for found in existing.columns:
        if shape.column(found.name) is not None:
            continue
        if found.not_null and not found.has_default:
            differences.append(
                Difference(
                    found.name,
                    found.shown(),
                    "no column (the declaration does not write it)",
                    "refuse",
                    f"no row could be written without it: put field {found.name} back in the schema, or "
                    f"ALTER TABLE {table} ALTER COLUMN {found.name} DROP NOT NULL",
                )
            )
        else:
            differences.append(
                Difference(
                    found.name,
                    found.shown(),
                    "no column",
                    "note",
                    "not written by the pipeline: new rows get " + ("its default" if found.has_default else "NULL"),
                )
            )
    differences += _key(shape, existing)
    differences += _partitioning(shape, existing)
    return Comparison(shape, tuple(differences))


def _partitioning(shape: TableShape, existing: ExistingTable) -> list[Difference]:
    wanted = None if shape.partition_column is None else f"RANGE ({shape.partition_column})"
    if existing.partition_key == wanted:
        return []
    found = f"partitioned by {existing.partition_key}" if existing.partition_key else "not partitioned"
    if wanted is None:
        return [
            Difference(
                "(partitions)",
                found,
                "not partitioned",
                "note",
                "rows still land, in the partitions there are or the default one; no partition is made or dropped",
            )
        ]
    return [
        Difference(
            "(partitions)",
            found,
            f"partitioned by {wanted}",
            "refuse",
            f"a table is partitioned when it is created, and only then; {_NEW_TABLE}",
        )
    ]


def _decimal(table: str, wanted: Column, found: ExistingColumn) -> Difference:
    """A declared decimal's column of another type: unconstrained numeric holds every value; a numeric(p,s) of no
    more digits on either side of the point is widened; anything else is refused."""
    if found.type == "numeric":
        return Difference(wanted.name, found.type, wanted.type, "note", "numeric holds every value: kept as it is")
    declared, had = _digits(wanted.type), _digits(found.type)
    if had is not None and declared is not None and had[0] <= declared[0] and had[1] <= declared[1]:
        return Difference(
            wanted.name,
            found.type,
            wanted.type,
            "widen",
            f"widened to {wanted.type}: every value it holds is kept exactly (audited in microingest.schema_changes)",
        )
    narrower = "" if had is None else " microingest does not narrow a decimal column: rows there may not fit;"
    return Difference(
        wanted.name,
        found.type,
        wanted.type,
        "refuse",
        f"{found.type} cannot hold every {wanted.type} value, or holds values {wanted.type} cannot;{narrower} declare "
        f"the field as the column is, or change the column yourself (ALTER TABLE {table} ALTER COLUMN {wanted.name} "
        f"TYPE {wanted.type}, once every row fits) or {_NEW_TABLE}",
    )


def _digits(pg: str) -> tuple[int, int] | None:
    """(digits before the point, after) of numeric(p,s)."""
    match = _NUMERIC.fullmatch(pg)
    return None if match is None else (int(match[1]) - int(match[2]), int(match[2]))


def _missing(shape: TableShape, wanted: Column) -> list[Difference]:
    if wanted.role == "bookkeeping":
        return []
    if wanted.role == "value":
        return [
            Difference(
                wanted.name,
                None,
                wanted.type,
                "add",
                "added as a nullable column; rows already there keep NULL (a backfill with overlap "
                "replace fills it for past records)",
            )
        ]
    why = {
        "position": "every row carries its source position",
        "key": f"the {shape.sink_mode} sink's key is made of it",
        "measure": "a measure cannot be computed afterwards for the records already counted",
    }[wanted.role]
    return [Difference(wanted.name, None, wanted.ddl(), "refuse", f"{why}; {_NEW_TABLE}")]


def _key(shape: TableShape, existing: ExistingTable) -> list[Difference]:
    if frozenset(shape.key) in existing.unique_keys:
        return []
    found = "; ".join("(" + ", ".join(sorted(k)) + ")" for k in existing.unique_keys) or "none"
    wanted = "a unique key on (" + ", ".join(shape.key) + ")"
    if not shape.key_required:
        return [
            Difference(
                "(key)",
                f"unique keys {found}",
                wanted,
                "note",
                "without it the table itself would not refuse a position written twice (the ledger still does)",
            )
        ]
    return [
        Difference(
            "(key)",
            f"unique keys {found}",
            wanted,
            "refuse",
            f"the {shape.sink_mode} sink finds each row by it; a key that changed means another table: {_NEW_TABLE}",
        )
    ]


def create_statements(shape: TableShape) -> list[sql.Composed]:
    """CREATE TABLE and its indexes."""
    schema, name = split_table_name(shape.table)
    columns = [sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(c.ddl())) for c in shape.columns]
    columns.append(sql.SQL("PRIMARY KEY ({})").format(identifier_list(shape.key)))
    table = sql.Identifier(schema, name)
    statements = [sql.SQL("CREATE TABLE {} ({})").format(table, sql.SQL(", ").join(columns))]
    if shape.partition_column is not None:
        # The DEFAULT partition holds any time no partition does: a batch never fails for want of one.
        statements[0] += sql.SQL(" PARTITION BY RANGE ({})").format(sql.Identifier(shape.partition_column))
        statements.append(
            sql.SQL("CREATE TABLE {} PARTITION OF {} DEFAULT").format(sql.Identifier(schema, f"{name}_default"), table)
        )
    if shape.position_index:  # CREATE INDEX takes its name unqualified: in the table's schema
        statements.append(
            sql.SQL("CREATE INDEX {} ON {} ({})").format(
                sql.Identifier(f"{name}_position"), sql.Identifier(schema, name), identifier_list(shape.position_index)
            )
        )
    return statements
