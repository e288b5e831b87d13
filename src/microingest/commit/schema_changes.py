"""microingest.schema_changes: each change made to a target on its declaration's behalf, one row per column or
partition, in the transaction that makes it."""

from __future__ import annotations

import json

from microingest.declare.pipeline import Pipeline


def record_change(cur, pipeline: Pipeline, change: str, name: str, what: str, changed_by: str) -> None:
    """`change`: created | added | widened (a column, `what` its type) | partition_created | partition_dropped (a
    partition, `what` its range)."""
    cur.execute(
        "INSERT INTO microingest.schema_changes (pipeline, target_table, change, column_name, column_type, "
        "declaration, declared_schema, changed_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            pipeline.name,
            pipeline.target_table,
            change,
            name,
            what,
            pipeline.source or "<unknown>",
            json.dumps({f.name: f.declared() for f in pipeline.schema}),
            changed_by,
        ),
    )
