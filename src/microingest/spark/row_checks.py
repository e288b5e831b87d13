"""Checks before commit (`checks:`), evaluated in Spark over the rows a batch would write, before its masks.

A record-level check (`on_fail: dead_letter`) is computed with each row (`failed_check`, inside the statement's
query, so a value it fails on is found as the statement's are) and makes a failing record a dead letter of class
`check_failed`. A batch-level check (`on_fail: refuse`) is one aggregate over the rows that pass the record-level
ones; when it is false the batch is refused with the condition and a sample, nothing written. A condition that is
NULL passes, as a Postgres CHECK constraint's does.
"""

from __future__ import annotations

from microingest.declare.pipeline import Pipeline
from microingest.declare.sql_statement import FAILED_COLUMN, POSITION_COLUMNS, condition_columns, sample_predicate
from microingest.errors import Refused
from microingest.spark.record_faults import RecordFault, fault_condition, value_fault

FAILED = FAILED_COLUMN  # the index (in `checks:`) of the first record-level check a row fails, else NULL
CHECK_FAILED = "check_failed"  # a dead letter's class
SAMPLE_ROWS = 3


class CheckFailedError(Refused):
    """A batch-level check is false for a batch: nothing of it was written; a retry would meet the same rows."""


def failed_check(pipeline: Pipeline) -> str:
    """A Spark SQL expression over a row: the index of the first record-level check it fails, or NULL."""
    whens = [
        # Each condition on lines of its own: a comment ending it ends there.
        f"WHEN NOT coalesce((\n{check.condition}\n), true) THEN {i}"
        for i, check in enumerate(pipeline.checks)
        if check.per_record
    ]
    return f"CASE {' '.join(whens)} END" if whens else "CAST(NULL AS INT)"


def failing_checks(output, pipeline: Pipeline) -> list[RecordFault]:
    """The rows of `output` (with FAILED) that fail a record-level check, each with the check it fails."""
    if not any(check.per_record for check in pipeline.checks):
        return []
    failing = output.where(f"{FAILED} IS NOT NULL").select(*POSITION_COLUMNS, FAILED).collect()
    return [RecordFault(t, p, o, f"checks[{i}] failed: {pipeline.checks[i].condition}") for t, p, o, i in failing]


def check_batch(rows, pipeline: Pipeline, batch_id: str) -> None:
    """Raise CheckFailedError when a batch-level check is false over `rows` (those the batch would write)."""
    from pyspark.sql import functions as F

    checks = [(i, check) for i, check in enumerate(pipeline.checks) if not check.per_record]
    if not checks or rows.isEmpty():
        # A batch with no rows to write (markers only, or every record filtered out) passes: a condition such as
        # count(*) > 0 would refuse the same range on every run, and the pipeline could never pass it.
        return
    try:
        values = rows.agg(*[F.expr(f"(\n{check.condition}\n)").alias(f"check_{i}") for i, check in checks]).first()
    except Exception as exc:  # classic and Spark Connect raise different classes: the SQLSTATE says what failed
        state = str(getattr(exc, "getSqlState", lambda: None)() or "")
        if state.startswith(("42", "0A")):  # the conditions themselves: a retry would meet them again
            first = next((line.strip() for line in str(exc).splitlines() if line.strip()), state)
            raise CheckFailedError(f"pipeline '{pipeline.name}': Spark refuses its checks: {first}") from None
        message = value_fault(exc)
        if message is None:
            raise
        raise CheckFailedError(
            f"batch {batch_id} of pipeline '{pipeline.name}' refused: its checks could not be computed over its rows "
            f"({fault_condition(message)}); nothing was written"
        ) from None
    for (i, check), value in zip(checks, values, strict=True):
        if value is False:
            raise CheckFailedError(
                f"batch {batch_id} of pipeline '{pipeline.name}' refused: checks[{i}] is false: {check.condition}; "
                f"nothing was written. {_sample(rows, pipeline, check.condition)}"
            )


def _sample(rows, pipeline: Pipeline, condition: str) -> str:
    """A few of the rows the condition counts (all rows when it does not say which), with the fields it names
    that the pipeline does not mask."""
    masked = {name for name, _ in pipeline.mask}
    shown = [c for c in condition_columns(condition) if c in pipeline.value_columns and c not in masked]
    predicate = sample_predicate(condition)
    found = (rows.where(predicate) if predicate else rows).select(*POSITION_COLUMNS, *shown).limit(SAMPLE_ROWS)
    lines = [
        f"{r[0]}[{r[1]}]@{r[2]}" + (" " + ", ".join(f"{c}={r[3 + k]!r}" for k, c in enumerate(shown)) if shown else "")
        for r in found.collect()
    ]
    return f"Sample{' (' + predicate + ')' if predicate else ''}: {'; '.join(lines) or 'none'}"
