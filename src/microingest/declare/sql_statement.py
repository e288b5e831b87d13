"""A pipeline's `transform_sql`, checked when its declaration loads: one SELECT over `batch` that maps each record to
at most one row and keeps its source position, whose output columns are the declared fields.

`batch` is the decoded batch as Spark sees it: the columns of `BATCH_COLUMNS` and the declared fields, typed. A
statement may compute, rename, filter and cast; it may not join, aggregate, window, explode, limit or deduplicate,
for each of those makes a row from several records or a record into several rows, and a record's fate would no
longer be one row, one dead letter or one counted drop. Spark parses and analyses the statement again when a job
starts (`spark.sql_transform`), and every batch's rows are checked against the records read whatever it says.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

# The source position, which every output row carries unchanged; then the record's own columns a statement may read.
POSITION_COLUMNS = ("source_topic", "source_partition", "source_offset")
RECORD_COLUMNS = ("kafka_timestamp", "record_key")
BATCH_COLUMNS = POSITION_COLUMNS + RECORD_COLUMNS
VIEW = "batch"
# Columns the platform adds to a batch's rows in Spark (`spark.typed_rows`, `spark.sql_transform`, `spark.row_checks`):
# no declared field of a pipeline whose rows pass through Spark SQL may take their names, nor begin as the summary's
# own columns do (`typed_rows.summary_column`).
SUMMARY_COLUMN, READ_COLUMN, FAILED_COLUMN = "_summary", "_read", "_failed_check"
INTERNAL_COLUMNS = (SUMMARY_COLUMN, READ_COLUMN, FAILED_COLUMN)


def internal(name: str) -> bool:
    """Whether a column of this name is the platform's own where rows pass through Spark SQL."""
    return name in INTERNAL_COLUMNS or name.startswith(f"{SUMMARY_COLUMN}_")


# Constructs that make a row of several records, several rows of one record, or drop records by their number.
_REFUSED: dict[type, str] = {
    exp.With: "a WITH clause",
    exp.Join: "a join",
    exp.Subquery: "a subquery",
    exp.Group: "GROUP BY",
    exp.Having: "HAVING",
    exp.AggFunc: "an aggregate function",
    exp.Window: "a window function",
    exp.Explode: "a generator (explode)",
    exp.Inline: "a generator (inline)",
    exp.Lateral: "LATERAL VIEW",
    exp.Unnest: "UNNEST",
    exp.Limit: "LIMIT",
    exp.Offset: "OFFSET",
    exp.Distinct: "DISTINCT",
    exp.Qualify: "QUALIFY",
    exp.TableSample: "TABLESAMPLE",
    exp.SetOperation: "a set operation (UNION, EXCEPT, INTERSECT)",
    exp.Pivot: "PIVOT or UNPIVOT",
}
# Functions a statement or check may not call: generators (several rows of one record); those whose value differs
# each time Spark computes a row (a row checked would not be the row written, nor a probe's the batch's); and those
# that call into the JVM of a shared Spark server.
_REFUSED_FUNCTIONS = {
    **dict.fromkeys(
        ("explode", "explode_outer", "posexplode", "posexplode_outer", "inline", "inline_outer", "stack"),
        "a generator",
    ),
    **dict.fromkeys(
        (
            "rand",
            "randn",
            "random",
            "randstr",
            "uniform",
            "uuid",
            "shuffle",
            "monotonically_increasing_id",
            "spark_partition_id",
            "input_file_name",
            "input_file_block_start",
            "input_file_block_length",
        ),
        "a function whose value changes each time a row is computed",
    ),
    **dict.fromkeys(("reflect", "java_method", "try_reflect"), "a call into the JVM"),
}


class StatementError(ValueError):
    """What is wrong with a transform_sql statement, in the words a declaration's error gives."""


def check_statement(statement: str, fields: tuple[str, ...]) -> None:
    """Raise StatementError unless `statement` is a record-by-record SELECT over `batch` whose output is the source
    position and exactly the declared `fields` (each once; with `*`, those it does not name come as decoded)."""
    select = _parsed(statement)
    for node in select.walk():
        refused = next((what for kind, what in _REFUSED.items() if isinstance(node, kind)), None)
        if refused is not None and node is not select:
            raise StatementError(f"may not use {refused}: each record must make at most one row of its own")
        _check_function(node)
    tables = list(select.find_all(exp.Table))
    if len(tables) != 1 or tables[0].name.lower() != VIEW or tables[0].args.get("db"):
        raise StatementError(f"must read FROM {VIEW} alone (the decoded batch), not {_named(tables)}")
    _check_output(select, fields)


def _check_function(node: object) -> None:
    if not isinstance(node, exp.Func):
        return
    name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
    refused = _REFUSED_FUNCTIONS.get(name)
    if refused is not None:
        raise StatementError(f"may not call {name}: it is {refused}")


def _parsed(statement: str) -> exp.Select:
    try:
        parsed = [p for p in sqlglot.parse(statement, read="spark") if p is not None]
    except ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "a syntax error"
        raise StatementError(f"is not valid Spark SQL: {first}") from None
    if len(parsed) != 1:
        raise StatementError(f"must be one statement, not {len(parsed)}")
    statement_node = parsed[0]
    if not isinstance(statement_node, exp.Select):
        raise StatementError(f"must be a SELECT, not {statement_node.key.upper()}")
    return statement_node


def _check_output(select: exp.Select, fields: tuple[str, ...]) -> None:
    declared = {f.lower(): f for f in fields}
    star = False
    named: list[str] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star):
            star = True
            continue
        name = projection.alias_or_name
        if not isinstance(projection, (exp.Column, exp.Alias)) or not name:
            raise StatementError(f"gives a column no name ({projection.sql(dialect='spark')}): name it with AS")
        lowered = name.lower()
        if lowered in BATCH_COLUMNS:
            if not (isinstance(projection.unalias(), exp.Column) and projection.unalias().name.lower() == lowered):
                raise StatementError(f"must keep {name} as the record's own (select it as it is, or use *)")
        elif lowered not in declared:
            raise StatementError(f"outputs {name}, which is no declared field (declared: {', '.join(fields)})")
        if lowered in (n.lower() for n in named) or (star and (lowered in declared or lowered in BATCH_COLUMNS)):
            raise StatementError(f"outputs {name} twice" + (" (once through *)" if star else ""))
        named.append(name)
    if star:
        return
    have = {n.lower() for n in named}
    missing = [c for c in POSITION_COLUMNS if c not in have]
    if missing:
        raise StatementError(f"must keep the source position: add {', '.join(missing)} (or use *)")
    left_out = [f for f in fields if f.lower() not in have]
    if left_out:
        raise StatementError(f"leaves out declared field(s) {', '.join(left_out)}: select them, or NULL AS <field>")


def check_condition(condition: str, per_record: bool, fields: tuple[str, ...]) -> None:
    """Raise StatementError unless `condition` is one Spark SQL condition over the source position and `fields`:
    over each row (`per_record`: no aggregate) or over the whole batch (every column inside an aggregate, as in
    `count(*) FILTER (WHERE total < 0) = 0`)."""
    expression = _condition(condition)
    for node in expression.walk():
        _check_function(node)
        refused = next((what for kind, what in _REFUSED.items() if isinstance(node, kind)), None)
        if isinstance(node, exp.AggFunc) and per_record:
            raise StatementError("is checked on each record (on_fail: dead_letter): it may not aggregate")
        if refused is not None and not isinstance(node, (exp.AggFunc, exp.Distinct)):
            raise StatementError(f"may not use {refused}")
    # The rows a check reads are the statement's: the position and the declared fields.
    known = {c.lower() for c in POSITION_COLUMNS + fields}
    for column in expression.find_all(exp.Column):
        if column.table:
            raise StatementError(f"names {column.sql(dialect='spark')}: name columns alone, as the row has them")
        if column.name.lower() not in known:
            raise StatementError(f"names {column.name}, which is no field (fields: {', '.join(fields)})")
        if not per_record and column.find_ancestor(exp.AggFunc, exp.Filter) is None:
            raise StatementError(
                f"refuses the whole batch (on_fail: refuse), so it aggregates: {column.name} is outside any "
                "aggregate (count(*) FILTER (WHERE ...) = 0, say; or on_fail: dead_letter to check each record)"
            )


def condition_columns(condition: str) -> list[str]:
    """The columns a condition names, each once, in the order it names them."""
    return list(dict.fromkeys(column.name for column in _condition(condition).find_all(exp.Column)))


def sample_predicate(condition: str) -> str | None:
    """The rows a batch-level condition counts, when it says (the WHERE of its first FILTER, or count_if's
    argument): those a refusal shows as a sample."""
    expression = _condition(condition)
    for node in expression.walk():
        if isinstance(node, exp.Filter):
            where = node.args.get("expression")
            return where.this.sql(dialect="spark") if isinstance(where, exp.Where) else None
        if isinstance(node, exp.CountIf):
            return node.this.sql(dialect="spark")
    return None


def _condition(condition: str) -> exp.Expression:
    try:
        parsed = sqlglot.parse_one(f"SELECT {condition}", read="spark")
    except ParseError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "a syntax error"
        raise StatementError(f"is not a valid Spark SQL condition: {first}") from None
    others = [key for key, value in parsed.args.items() if value and key != "expressions"]
    if not isinstance(parsed, exp.Select) or len(parsed.expressions) != 1 or others:
        raise StatementError("must be one condition (what a WHERE clause would hold)")
    return parsed.expressions[0]


def _named(tables: list[exp.Table]) -> str:
    return ", ".join(t.sql(dialect="spark") for t in tables) or "no table"
