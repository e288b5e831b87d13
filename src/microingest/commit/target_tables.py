"""Target tables owned by their declarations: created when missing, given a declared field's column when the
declaration gains one (each change audited in microingest.schema_changes), refused when they do not fit.

`prepare_target` is what `microingest migrate`, `make up` and a DAG run's planning run; `check_target` is what a job
runs before its first batch, changing nothing. What fits and what does not is decided in `table_shape`.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg2 import sql

from microingest.commit.partitions import drop_expired_partitions
from microingest.commit.schema_changes import record_change
from microingest.commit.table_shape import (
    Column,
    Comparison,
    Difference,
    ExistingColumn,
    ExistingTable,
    compare,
    create_statements,
    declared_shape,
)
from microingest.declare.identifiers import split_table_name
from microingest.declare.pipeline import Pipeline
from microingest.errors import MicroingestError, Refused
from microingest.systems.pipeline_systems import PipelineSystems
from microingest.systems.postgres import advisory_lock, require_utf8


class TargetError(Refused):
    """A target table cannot take the pipeline's rows; the message says which column or constraint, and what to do."""


class TargetShapeError(TargetError):
    def __init__(self, pipeline: Pipeline, differences: tuple[Difference, ...]):
        self.differences = differences
        super().__init__(
            f"target table {pipeline.target_table} does not fit pipeline {pipeline.name}'s declaration "
            "and was left as it is:\n" + "\n".join(f"  - {d}" for d in differences)
        )


@dataclass(frozen=True)
class Preparation:
    """What `prepare_target` found and did."""

    pipeline: str
    table: str
    created: tuple[Column, ...] = ()
    added: tuple[Column, ...] = ()
    notes: tuple[Difference, ...] = ()
    widened: tuple[Column, ...] = ()
    dropped: tuple[str, ...] = ()  # partitions past the declaration's retention

    def summary(self) -> str:
        changes = [f"added {c.name} {c.type}" for c in self.added] + [
            f"widened {c.name} to {c.type}" for c in self.widened
        ]
        if self.dropped:
            changes.append(f"dropped {len(self.dropped)} partition(s) past retention: {', '.join(self.dropped)}")
        if self.created:
            done = f"created with {len(self.created)} columns"
        elif changes:
            done = ", ".join(changes)
        else:
            done = "matches the declaration"
        return f"pipeline {self.pipeline}: target {self.table} {done}" + "".join(f"\n  note: {n}" for n in self.notes)


def existing_table(cur, table: str) -> ExistingTable | None:
    cur.execute("SELECT to_regclass(%s)::oid", (sql.Identifier(*split_table_name(table)).as_string(cur),))
    oid = cur.fetchone()[0]
    if oid is None:
        return None
    cur.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef FROM pg_attribute "
        "WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (oid,),
    )
    columns = tuple(ExistingColumn(*row) for row in cur.fetchall())
    # Keys ON CONFLICT can name: unique, over plain columns (indexprs), for every row (indpred).
    cur.execute(
        "SELECT array(SELECT attname FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = "
        "ANY(i.indkey)) FROM pg_index i WHERE i.indrelid = %s AND i.indisunique AND i.indexprs IS NULL "
        "AND i.indpred IS NULL",
        (oid,),
    )
    keys = tuple(frozenset(r[0]) for r in cur.fetchall())
    # The partition key by its columns' names as they are (pg_get_partkeydef quotes a keyword such as "timestamp").
    cur.execute(
        "SELECT partstrat, array(SELECT a.attname FROM unnest(p.partattrs) WITH ORDINALITY k(attnum, n) "
        "JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.attnum ORDER BY k.n) "
        "FROM pg_partitioned_table p WHERE p.partrelid = %s",
        (oid,),
    )
    found = cur.fetchone()
    partition_key = None
    if found is not None:
        strategy = {"r": "RANGE", "l": "LIST", "h": "HASH"}.get(found[0], found[0])
        partition_key = f"{strategy} ({', '.join(found[1]) or 'an expression'})"
    return ExistingTable(columns, keys, partition_key)


def prepare_target(cur, pipeline: Pipeline, changed_by: str) -> Preparation:
    """Create the target when missing, or add the columns of declared fields it lacks; in the caller's transaction,
    which commits the change and its audit together. Raises TargetShapeError, changing nothing, when it does not fit."""
    advisory_lock(cur, f"microingest:ddl:{pipeline.target_table}", transaction=True)  # racing runs' planning
    shape = declared_shape(pipeline)
    found = existing_table(cur, shape.table)
    if found is None:
        schema, _ = split_table_name(shape.table)
        cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        for statement in create_statements(shape):
            cur.execute(statement)
        _audit(cur, pipeline, "created", shape.columns, changed_by)
        return Preparation(pipeline.name, shape.table, created=shape.columns)
    comparison = compare(shape, found)
    if comparison.refusals:
        raise TargetShapeError(pipeline, comparison.refusals)
    table = sql.Identifier(*split_table_name(shape.table))
    for column in comparison.additions:
        cur.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(table, sql.Identifier(column.name), sql.SQL(column.type))
        )
    for column in comparison.widenings:
        cur.execute(
            sql.SQL("ALTER TABLE {} ALTER COLUMN {} TYPE {}").format(
                table, sql.Identifier(column.name), sql.SQL(column.type)
            )
        )
    _audit(cur, pipeline, "added", comparison.additions, changed_by)
    _audit(cur, pipeline, "widened", comparison.widenings, changed_by)
    dropped = drop_expired_partitions(cur, pipeline, changed_by) if shape.partition_column else []
    return Preparation(
        pipeline.name,
        shape.table,
        added=comparison.additions,
        notes=comparison.notes,
        widened=comparison.widenings,
        dropped=tuple(dropped),
    )


def _audit(cur, pipeline: Pipeline, change: str, columns: tuple[Column, ...], changed_by: str) -> None:
    for column in columns:
        record_change(cur, pipeline, change, column.name, column.ddl(), changed_by)


def check_target(cur, pipeline: Pipeline) -> Comparison:
    """Refuse, before anything is read, a database or target that cannot take the pipeline's rows; changes nothing."""
    require_utf8(cur)
    found = existing_table(cur, pipeline.target_table)
    if found is None:
        raise TargetError(
            f"target table {pipeline.target_table} does not exist; `microingest migrate` creates it "
            "from the declaration, as does each run of the pipeline's DAG"
        )
    comparison = compare(declared_shape(pipeline), found)
    if comparison.refusals:
        raise TargetShapeError(pipeline, comparison.refusals)
    if comparison.additions:
        raise TargetError(
            f"target table {pipeline.target_table} lacks the columns of declared field(s) "
            f"{', '.join(c.name for c in comparison.additions)}; `microingest migrate` adds them "
            "(audited in microingest.schema_changes), as does each run of the pipeline's DAG"
        )
    if comparison.widenings:
        raise TargetError(
            f"target table {pipeline.target_table} has narrower decimal columns than declared: "
            f"{', '.join(f'{c.name} (declared {c.type})' for c in comparison.widenings)}; `microingest migrate` "
            "widens them (audited in microingest.schema_changes), as does each run of the pipeline's DAG"
        )
    return comparison


def prepare_targets(pipelines: list[Pipeline], changed_by: str) -> list[Preparation | MicroingestError]:
    """Prepare each pipeline's target in its own transaction: one that does not fit, or whose Postgres is away, is
    reported in its place and the others are still prepared."""

    results: list[Preparation | MicroingestError] = []
    for pipeline in pipelines:
        try:
            with PipelineSystems.of(pipeline).db() as conn, conn, conn.cursor() as cur:
                results.append(prepare_target(cur, pipeline, changed_by))
        except MicroingestError as exc:
            results.append(exc)
    return results
