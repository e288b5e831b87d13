"""A batch of a pipeline with `transform_sql`, checks or masks, in Spark: decoded into typed rows (by the JVM decoder
where it takes the record, `jvm_typed`; else on the executors by the reference, `typed_rows`), the statement run over
them as the view `batch`, its rows checked against the records read and encoded for COPY on the executors. Only the
dead letters, the positions read and the COPY chunks reach the driver, spooled as they come (`commit.spool`). The
statement's decimal and json values are held to the decoder's rules (`held_call`): in the JVM where the batch is
decoded there; by the reference wherever the JVM leaves a value, which then runs the batch's statement again.

Every record read ends as one of: a row, a dead letter (by the decoder, or `sql_failed` where the statement fails on
its value, an ANSI cast say: found by halving, `record_faults`), or a record the statement filtered out (counted,
recorded with the batch). A row whose position was not read, or a position given twice, refuses the batch.
Tombstones carry no value for the statement to read: they pass to the sink as they are.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import operator
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc

from microingest import settings
from microingest.batches import NOTED_DEAD_LETTERS, ROW_COLUMNS, DeadLetterNote, Span
from microingest.commit.copy_commit import DecodedBatch
from microingest.commit.sinks import StagedCounts
from microingest.commit.spool import Spool
from microingest.declare.pipeline import Field, Pipeline
from microingest.declare.sql_statement import BATCH_COLUMNS, POSITION_COLUMNS, READ_COLUMN
from microingest.decode.held_values import REFUSED, held, holds
from microingest.decode.jvm_spec import HELD_FUNCTION, held_spec
from microingest.decode.staged_rows import WITHHELD, dead_letters
from microingest.decode.storable import MAX_EPOCH_MICROS, MIN_EPOCH_MICROS
from microingest.errors import Refused
from microingest.faults import corrupts
from microingest.spark.dead_letter_limit import check_dead_letters
from microingest.spark.decoder import text_chunks
from microingest.spark.jvm_decode import JvmDecoding, decoded_frame, distrust
from microingest.spark.jvm_self_check import JvmMismatchError, log_share
from microingest.spark.jvm_typed import JvmTypedDecoder
from microingest.spark.record_faults import (
    UNSTORED_MARK,
    RecordFault,
    Slice,
    TooManyFaultsError,
    UnplacedFaultError,
    fault_condition,
    faulty_records,
    slices_of,
    value_fault,
)
from microingest.spark.row_checks import CHECK_FAILED, FAILED, check_batch, failed_check, failing_checks
from microingest.spark.row_encoder import RowEncoder
from microingest.spark.typed_rows import SUMMARY, SUMMARY_SELECT, TypedDecoder, staged_schema

log = logging.getLogger(__name__)

SQL_FAILED = "sql_failed"  # a dead letter's class: transform_sql failed on the record's value
# The records of one batch the statement may fail on before the batch is refused: each costs about two Spark jobs per
# halving of the batch, and so many failing records say the statement needs try_cast rather than dead letters.
MAX_RECORD_FAULTS = 16
_READ = READ_COLUMN
PASS_THROUGH = "SELECT * FROM batch"  # a pipeline with checks or masks but no statement


class TransformError(Refused):
    """A pipeline's transform_sql cannot make this batch's rows: Spark refuses the statement, it fails on too many
    records, or its rows do not come one each from the records read. Nothing of the batch was written."""


def register_held(spark, pipeline: Pipeline) -> None:
    """The session's functions that hold the statement's values of each decimal and json field to the decoder's
    rules (`held_values`), by the names `statement_sql` calls them."""
    from pyspark.sql.functions import udf

    for field in pipeline.schema:
        if holds(field):
            # Not an Arrow UDF: through pandas, a NULL would arrive as NaN and a large integer as a float.
            spark.udf.register(_held_function(field), udf(functools.partial(held, field), "string", useArrow=False))


def _staged_from_text(field: Field, text: str, staged: str) -> str:
    """SQL: the held value's text (`held_values.held`) as the staged type: exact, it needs no rounding."""
    return f"from_json({text}, '{staged}')" if field.type == "array" else f"CAST({text} AS {staged})"


def _held_function(field: Field) -> str:
    """Named by all the field declares: jobs share a Spark Connect session, and two pipelines' fields of one name may
    be declared differently (one function per declaration, whoever registers it)."""
    return f"microingest_held_{hashlib.blake2b(repr(field).encode(), digest_size=8).hexdigest()}"


def transformed(
    spark,
    pipeline: Pipeline,
    registry,
    frame,
    batch_id: str,
    into_target: bool,
    started_at: datetime,
    mask_key,
    backfill: bool = False,
    jvm: JvmDecoding | None = None,
    every: int = 1,
) -> DecodedBatch:
    """The batch read as `frame` (`batch.read_frame`), decoded and passed through the pipeline's statement, checks
    and masks. `mask_key`: the keyed hash's (`PipelineSystems.mask_key`). A backfill's also says where the records
    the statement filtered out were (`DecodedBatch.filtered_at`). `jvm`: the pipeline's decoding function, which
    decodes the records it takes (`jvm_typed`, checking one in `every` against the reference); when it is refused
    or its values differ from the reference's, the batch is decoded again by the reference alone."""
    # The statement's casts and arithmetic fail on a value that does not fit, as the declared types do, whatever the
    # server's default: without ANSI they give NULL or wrap around, and the value would change silently.
    spark.conf.set("spark.sql.ansi.enabled", "true")
    register_held(spark, pipeline)
    with _quiet_query_context():
        if jvm is not None and jvm.usable:
            try:
                return _transformed(
                    spark, pipeline, registry, frame, batch_id, into_target, started_at, mask_key, backfill, jvm, every
                )
            except Exception as exc:  # the JVM's refusals: what `distrust` does not recognise is raised again
                distrust(jvm, pipeline, exc)
        return _transformed(spark, pipeline, registry, frame, batch_id, into_target, started_at, mask_key, backfill)


@contextlib.contextmanager
def _quiet_query_context() -> Iterator[None]:
    """pyspark logs each failed query's SQL context at ERROR, stack and all: a probe's expected failures would flood
    the job's log (and put record values in it); what they found is logged once, by the batch."""
    context_log = logging.getLogger("SQLQueryContextLogger")
    level = context_log.level
    context_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        context_log.setLevel(level)


def _transformed(
    spark, pipeline: Pipeline, registry, frame, batch_id, into_target, started_at, mask_key, backfill, jvm=None, every=1
) -> DecodedBatch:
    if jvm is None:
        decoder = TypedDecoder(pipeline, batch_id, registry, into_target)
        typed = frame.mapInArrow(decoder, decoder.spark_schema)
    else:
        decoder = JvmTypedDecoder(pipeline, batch_id, registry, into_target, corrupts("jvm_self_check"))
        typed = decoded_frame(frame, jvm, every).mapInArrow(decoder, decoder.spark_schema)
    with contextlib.ExitStack() as owned:  # the encoded rows' spool, closed if the batch is not made
        typed = typed.persist()
        view = f"microingest_batch_{uuid.uuid4().hex}"
        memory = settings.batch_memory_bytes()
        try:
            summary = typed.where(SUMMARY).selectExpr(*SUMMARY_SELECT).toArrow()
            mismatch = next((m for m in summary.column("mismatch").to_pylist() if m), None)
            if mismatch is not None:
                raise JvmMismatchError(mismatch)
            taken = _sum(summary, "taken")
            if jvm is not None:
                log_share(
                    batch_id, taken, _sum(summary, "checked"), _sum(summary, "good") + _sum(summary, "bad") - taken
                )
            spans = [Span(**s) for spans in summary.column("spans").to_pylist() for s in spans]
            rows = typed.where(f"NOT {SUMMARY}")
            records = rows.where("NOT is_tombstone")
            records.select(*BATCH_COLUMNS, *pipeline.value_columns).createOrReplaceTempView(view)
            output, found = _output(spark, pipeline, view, records, rows, batch_id, spans, jvm)
            try:
                total = output.count()
                # The guard before the failing records are gathered, each read again from Kafka: a check that fails
                # most of a large batch is refused here, as the whole batch would be once they were.
                failing = output.where(f"{FAILED} IS NOT NULL").count()
                bad, read = _sum(summary, "bad") + len(found) + failing, _sum(summary, "good") + _sum(summary, "bad")
                check_dead_letters(
                    pipeline,
                    batch_id,
                    StagedCounts(0, bad, read - bad),
                    lambda: [f"{len(found)} the statement failed on, {failing} failing checks", *_noted(summary)],
                )
                refused = failing_checks(output, pipeline)
                check_batch(output.where(f"{FAILED} IS NULL AND NOT is_tombstone"), pipeline, batch_id)
                kept = output.where(f"{FAILED} IS NULL").drop(_READ, FAILED)
                rows_spool, written, chunks = RowEncoder(pipeline, into_target, mask_key).spooled(kept, memory)
                owned.callback(rows_spool.close)
                filtered_at = (
                    _filtered_at(records, output, found)
                    if backfill and _sum(summary, "good") > len(found) + total
                    else []
                )
            finally:
                output.unpersist()
        finally:
            spark.catalog.dropTempView(view)
            spark.catalog.dropTempView(_rows_view(view))
            typed.unpersist()
        decoded = _sum(summary, "good")
        filtered = decoded - len(found) - total
        withheld = bool(pipeline.mask)
        faults = [(f, SQL_FAILED, WITHHELD if withheld else f.message) for f in found]
        faults += [(f, CHECK_FAILED, f.message) for f in refused]
        lead = (pipeline.name, batch_id) if into_target else (batch_id,)
        if written != total - len(refused) or filtered < 0:
            raise TransformError(
                f"batch {batch_id}: {decoded} records decoded, {len(found)} failed, {total} rows checked, "
                f"{len(refused)} failing checks, but {written} encoded; nothing was written"
            )
        failed = _dead_letters(spark, frame, faults, lead, withheld)
        notes = _notes(summary)
        notes += [DeadLetterNote(f.topic, f.partition, f.offset, cls, m) for f, cls, m in faults[:NOTED_DEAD_LETTERS]]
        counts = StagedCounts(written, _sum(summary, "bad") + len(faults), filtered)
        log.info(
            "batch %s: %d records decoded, %d rows out of transform_sql, %d filtered out, %d it failed on, %d failing "
            "checks",
            batch_id,
            decoded,
            total,
            counts.filtered,
            len(found),
            len(refused),
        )
        made = DecodedBatch(
            batch_id=batch_id,
            rows=rows_spool,
            dead=Spool.of([*summary.column("dead").to_pylist(), *text_chunks(failed)], memory),
            counts=counts,
            spans=spans,
            notes=notes,
            filtered_at=filtered_at,
            decoded_in_jvm=taken,
            chunks=chunks,
            into_target=into_target,
            started_at=started_at,
            decoded_at=datetime.now(timezone.utc),
        )
        owned.pop_all()  # the batch's own from here: closed once it is committed
        return made


def _output(
    spark, pipeline: Pipeline, view: str, records, rows, batch_id: str, spans: Sequence[Span], jvm: JvmDecoding | None
):
    """The statement's rows over the view, persisted and verified, and the records it failed on (left out). `jvm`:
    the decoding function whose jar holds the statement's decimal and json values (`statement_sql`)."""
    found: list[RecordFault] = []
    try:
        return _verified(spark, pipeline, view, records, rows, batch_id, jvm), found
    except Exception as exc:  # classic and Spark Connect raise different classes: the SQLSTATE says what failed
        message = value_fault(exc)
        if message is None:
            _refuse_statement(pipeline, exc)
            raise
        if jvm is not None and any(holds(f) for f in pipeline.schema):
            # A value the JVM left, or a record the statement fails on: the reference holds the batch's values from
            # here, and names each record's fault in its own words.
            log.info("batch %s: transform_sql failed on a value; its values are held by the reference", batch_id)
            return _output(spark, pipeline, view, records, rows, batch_id, spans, None)
        found = _faults(spark, pipeline, records, slices_of(spans), message, batch_id)
    kept = records.where(~_at(found))
    kept.select(*BATCH_COLUMNS, *pipeline.value_columns).createOrReplaceTempView(view)
    return _verified(spark, pipeline, view, kept, rows, batch_id), found


def _verified(spark, pipeline: Pipeline, view: str, records, rows, batch_id: str, jvm: JvmDecoding | None = None):
    """The final rows (ROW_COLUMNS and the declared fields, cast to their staged types, and which record-level
    check each fails), persisted, each from one record read: the statement's rows joined by position to the
    records, and the tombstones."""
    from pyspark.sql import functions as F

    read = records.select(*POSITION_COLUMNS, "kafka_timestamp", "record_key", F.lit(True).alias(_READ))
    joined = spark.sql(statement_sql(pipeline, view, jvm)).join(F.broadcast(read), list(POSITION_COLUMNS), "left")
    fields = pipeline.value_columns
    output = joined.select(
        *POSITION_COLUMNS,
        "kafka_timestamp",
        F.lit(batch_id).alias("batch_id"),
        "record_key",
        F.lit(False).alias("is_tombstone"),
        *fields,
        FAILED,
        _READ,
    ).unionByName(
        rows.where("is_tombstone").select(
            *ROW_COLUMNS, *fields, F.lit(None).cast("int").alias(FAILED), F.lit(True).alias(_READ)
        )
    )
    # Persisted as a view's rows: the statement's CTE (`statement_sql`) takes new ids each time its SQL is analysed,
    # so a cache of the frame itself would never be found again and each later query would run the statement anew; a
    # view keeps the plan analysed once, and every query made from `spark.table` finds its cache.
    output.createOrReplaceTempView(_rows_view(view))
    output = spark.table(_rows_view(view)).persist()
    try:
        # The hash of every field is summed so the check computes them all: a value the statement fails on fails
        # here, before anything is collected, whatever Spark would prune from a count.
        total, strays, positions, _ = output.agg(
            F.count(F.lit(1)),
            F.count_if(F.col(_READ).isNull()),
            F.count_distinct(*POSITION_COLUMNS),
            F.sum(F.hash(*fields, FAILED)),
        ).first()
    except Exception:
        output.unpersist()
        raise
    if strays or positions != total:
        sample = output.where(F.col(_READ).isNull()).select(*POSITION_COLUMNS).limit(3).collect()
        output.unpersist()
        raise TransformError(
            f"batch {batch_id} of pipeline '{pipeline.name}' refused: transform_sql gave {total} rows for "
            f"{positions} positions, {strays} of them positions the batch did not read"
            + (f" (e.g. {', '.join(f'{r[0]}[{r[1]}]@{r[2]}' for r in sample)})" if sample else "")
            + "; each row must keep its record's source_topic, source_partition and source_offset. Nothing was written"
        )
    return output


def _rows_view(view: str) -> str:
    """The view of the statement's rows over `view` (`_verified`)."""
    return f"{view}_rows"


def _filtered_at(records, output, found: Sequence[RecordFault]) -> list[tuple[str, int, int]]:
    """The positions of the records the statement filtered out: read, neither a row nor a record it failed on."""
    failed = {(f.topic, f.partition, f.offset) for f in found}
    positions = list(POSITION_COLUMNS)
    gone = records.select(*positions).join(output.select(*positions), positions, "left_anti").collect()
    return [tuple(r) for r in gone if tuple(r) not in failed]


def statement_sql(pipeline: Pipeline, view: str, jvm: JvmDecoding | None = None) -> str:
    """The pipeline's statement (or all of `batch` when it has none) over `view` as `batch`, its fields cast to their
    staged types (ANSI: a value that does not fit fails, on its record) and held to what Postgres stores as the
    decoder holds them (`storable`): no NaN or infinity, no NUL in text; with the record-level check each row fails
    first (`row_checks.failed_check`)."""
    from pyspark.sql.pandas.types import from_arrow_type

    schema = staged_schema(pipeline)
    columns, held_columns = [], []
    for i, field in enumerate(pipeline.schema):
        staged = from_arrow_type(schema.field(field.name).type).simpleString()
        value = f"CAST(`{field.name}` AS {staged})"
        if holds(field):  # the decoder's own rules: in the JVM (HeldValueUdf), else in Python (`register_held`)
            held_columns.append(f"{held_call(field, f'`{field.name}`', jvm)} AS `{HELD_COLUMN}{i}`")
            h = f"`{HELD_COLUMN}{i}`"
            refused = f"concat('{UNSTORED_MARK} {field.name} a value the decoder refuses: ', substr({h}, 4))"
            value = (
                f"CASE WHEN {h} IS NULL THEN CAST(NULL AS {staged}) WHEN startswith({h}, '{REFUSED}') THEN "
                f"raise_error({refused}) ELSE {_staged_from_text(field, f'substr({h}, 4)', staged)} END"
            )
        refusals = [_UNSTORABLE[field.type]] if field.type in _UNSTORABLE else []
        if field.required:  # its column is NOT NULL: a NULL would refuse the whole batch at COPY, on every run
            refusals.append(_NULL_FOR_REQUIRED)
        if refusals:
            cases = " ".join(
                f"WHEN {condition.format(v=value)} THEN raise_error('{UNSTORED_MARK} {field.name} {problem}')"
                for condition, problem in refusals
            )
            value = f"CASE {cases} ELSE {value} END"
        columns.append(f"{value} AS `{field.name}`")
    statement = (pipeline.transform_sql or PASS_THROUGH).strip().rstrip(";")
    positions = ", ".join(f"`{c}`" for c in POSITION_COLUMNS)
    # The statement on lines of its own: a comment ending it ends there.
    output = f"(\n{statement}\n)"
    if held_columns:
        output = f"(SELECT *, {', '.join(held_columns)} FROM {output})"
    typed = f"SELECT {positions}, {', '.join(columns)} FROM {output}"
    # The record-level checks read the typed rows; which one a row fails (first) rides with it.
    return f"WITH batch AS (SELECT * FROM `{view}`) SELECT *, {failed_check(pipeline)} AS {FAILED} FROM ({typed})"


_NULL_FOR_REQUIRED = ("{v} IS NULL", "NULL, but the field is required")
# Per declared type: when a value is one Postgres would refuse or the decoder never stages, and why.
_UNSTORABLE = {
    "double": ("isnan({v}) OR abs({v}) = CAST('Infinity' AS DOUBLE)", "a number that is not finite"),
    "string": (
        "contains({v}, char(0)) OR NOT is_valid_utf8({v})",
        "text with a NUL character or not UTF-8, which Postgres text cannot store",
    ),
    "uuid": ("length({v}) <> 16", "a uuid that is not 16 bytes"),
    "timestamp": (
        f"unix_micros({{v}}) NOT BETWEEN {MIN_EPOCH_MICROS} AND {MAX_EPOCH_MICROS}",
        "a time outside the years 1 to 9999 in UTC",
    ),
}


def held_call(field: Field, column: str, jvm: JvmDecoding | None) -> str:
    """SQL: `column`'s value held to the decoder's rules for `field` (a decimal, decimal array or json field), as
    `held_values.held` answers: in the JVM where the job decodes there (HeldValueUdf, which leaves to `held` whatever
    it is not sure of), else by `held` itself (`register_held`)."""
    if jvm is None:
        return f"{_held_function(field)}({column})"
    return f"{HELD_FUNCTION}({column}, {_sql_text(held_spec(field, jvm.jar))})"


def _sql_text(text: str) -> str:
    """A Spark SQL string literal of `text`."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


HELD_COLUMN = "__microingest_held_"  # the statement's output columns of the held values (no field's name)


def _faults(spark, pipeline: Pipeline, records, slices: list[Slice], message: str, batch_id: str) -> list[RecordFault]:
    probe_view = f"microingest_probe_{uuid.uuid4().hex}"

    def probe(part: Sequence[Slice]) -> str | None:
        records.where(_at(part)).select(*BATCH_COLUMNS, *pipeline.value_columns).createOrReplaceTempView(probe_view)
        try:
            spark.sql(statement_sql(pipeline, probe_view)).write.format("noop").mode("overwrite").save()
        except Exception as exc:  # see value_fault
            failed = value_fault(exc)
            if failed is None:
                _refuse_statement(pipeline, exc)
                raise
            return failed
        return None

    try:
        found = faulty_records(slices, message, probe, MAX_RECORD_FAULTS)
    except TooManyFaultsError as exc:
        first = fault_condition(exc.found[0].message)
        raise TransformError(
            f"batch {batch_id} of pipeline '{pipeline.name}' refused: transform_sql fails on more than "
            f"{MAX_RECORD_FAULTS} of its records (first: {first}); nothing was written. A statement "
            "meant to meet such values can say so (try_cast, try_divide)"
        ) from None
    except UnplacedFaultError:
        raise TransformError(
            f"batch {batch_id} of pipeline '{pipeline.name}' refused: transform_sql fails on the batch "
            f"({fault_condition(message)}) but on none of its records alone; nothing was written"
        ) from None
    finally:
        spark.catalog.dropTempView(probe_view)
    log.warning("batch %s: transform_sql failed on %d record(s); they become dead letters", batch_id, len(found))
    return found


def _at(slices: Sequence[Slice | RecordFault]):
    """Records at any of the slices (or single records)."""
    from pyspark.sql import functions as F

    def one(s):
        first, last = (s.offset, s.offset) if isinstance(s, RecordFault) else (s.first, s.last)
        return (
            (F.col("source_topic") == s.topic)
            & (F.col("source_partition") == s.partition)
            & F.col("source_offset").between(first, last)
        )

    return functools.reduce(operator.or_, [one(s) for s in slices], F.lit(False))


def _dead_letters(spark, frame, faults, lead: tuple[str, ...], withheld: bool) -> list[str]:
    """The records (RecordFault, class, message) read again from Kafka whole, as dead letters."""
    if not faults:
        return []
    positions = spark.createDataFrame(
        [(f.topic, f.partition, f.offset) for f, _, _ in faults], "topic string, partition int, offset bigint"
    )
    table = frame.join(positions, ["topic", "partition", "offset"], "left_semi").toArrow()
    reasons = {(f.topic, f.partition, f.offset): (error_class, message) for f, error_class, message in faults}
    lines = []
    for batch in table.to_batches():
        for i in range(batch.num_rows):
            record = batch.slice(i, 1)
            at = tuple(record.column(name)[0].as_py() for name in ("topic", "partition", "offset"))
            error_class, message = reasons.pop(at)
            lines += dead_letters(record, lead, error_class, message, withheld)
    if reasons:
        raise TransformError(f"records {sorted(reasons)} were not found again in Kafka; nothing was written")
    return lines


def _refuse_statement(pipeline: Pipeline, exc: Exception) -> None:
    """Raise TransformError naming the error when it is the statement's own (Spark's analysis: an unknown column, a
    type it cannot cast): a retry would meet it again. Other failures are left to the caller to raise."""
    state = str(getattr(exc, "getSqlState", lambda: None)() or "")
    if state.startswith(("42", "0A")):  # a syntax or access rule error, a feature not supported: the statement
        first = next((line.strip() for line in str(exc).splitlines() if line.strip()), str(exc))
        raise TransformError(f"pipeline '{pipeline.name}': Spark refuses its transform_sql: {first}") from None


def _notes(summary: pa.Table) -> list[DeadLetterNote]:
    return [DeadLetterNote(**n) for notes in summary.column("notes").to_pylist() for n in notes]


def _noted(summary: pa.Table) -> list[str]:
    return [str(note) for note in _notes(summary)[:NOTED_DEAD_LETTERS]]


def _sum(table: pa.Table, column: str) -> int:
    return pc.sum(table.column(column)).as_py() or 0
