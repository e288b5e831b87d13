"""Records decoded by Spark's JVM (`decode.jvm_spec`): the decoding function made known to a job's session, with the
plans of an Avro pipeline's writer schemas from the registry, and a batch's read turned into typed columns for the
driver.

The function's jar (build/jvm-decoders, `make install`) travels with the job: a Spark Connect client sends it to its
session with addArtifacts, so a server needs nothing of microingest; spark-submit puts it on `--jars`
(`submit.submit_argv`). The executors then need no Python for a record the JVM takes: only the records it declines,
and a sample of those it takes, come back to the driver with their bytes, for the reference decoder there
(`jvm_collected`). Where the rows stay in Spark for a statement, the executors' Python makes the JVM's values typed
rows by Arrow casts and decodes only those same records (`jvm_typed`).
"""

from __future__ import annotations

import json
import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from microingest import faults, settings
from microingest.declare.pipeline import Pipeline
from microingest.decode import jvm_avro, jvm_spec
from microingest.decode.held_values import holds
from microingest.spark import connect
from microingest.spark.jvm_self_check import JvmMismatchError
from microingest.systems.schema_registry import subject_schemas, subjects

log = logging.getLogger(__name__)

# The driver re-decodes about this many of the records the JVM took in each batch (`sample_every`): all of a small
# batch, about 100 of a large one (at 30 µs a record, 3 ms of the driver's time).
SAMPLE_RECORDS = 100
# An Avro pipeline's writer schemas the JVM reads: those of this many newest versions of each topic's value subject.
# Records of any other schema go to the reference, as do those of a version registered after the job began.
WRITER_VERSIONS = 20
# What the decoder's refusals to run say (RecordDecoder.checkBuild, RecordSpec, AvroWriterPlan).
_REFUSALS = ("another build of microingest", "in decoding spec", "decoding spec:", "writer plan")
# What Spark says when the session's function, of an older build, takes other arguments than this job passes.
_OTHER_ARGUMENTS = ("WRONG_NUM_ARGS", "microingest_decode_")


@dataclass
class JvmDecoding:
    """A pipeline's decoding function, registered in the job's session."""

    function: str
    spec: str
    reads_headers: bool = False  # fields from the record's headers: the function is given them
    jar: str | None = None  # the decoder jar's name in a Spark Connect session (`spec`'s "jar")
    # Set when a batch's self-check found the JVM's values differ from the reference's: the job decodes the rest of
    # its batches by the reference alone.
    distrusted: str | None = None

    @property
    def usable(self) -> bool:
        return self.distrusted is None


def prepare(spark, pipeline: Pipeline, registry: dict[str, str] | None = None) -> JvmDecoding | None:
    """The pipeline's decoding function in this session, or None (with the reason logged) when its batches are decoded
    by the reference alone. `registry`: the schema registry's settings, for an Avro pipeline."""
    reason = jvm_spec.declines_pipeline(pipeline)
    jar = settings.decoder_jar()
    if reason is None and jar is None:
        reason = "the decoder jar is not built (`make install` builds build/jvm-decoders)"
    if reason is None and not settings.jvm_decoding():
        reason = "MICROINGEST_JVM_DECODING is off"
    writers: dict[int, dict] = {}
    if reason is None and pipeline.value_format == "avro":
        writers = _writer_plans(pipeline, registry)
        if not writers:
            reason = "no writer schema of its topics' value subjects is one the JVM reads"
    if reason is not None or jar is None:
        log.info("pipeline %s: records decoded by the reference decoder in Python: %s", pipeline.name, reason)
        return None
    function = jvm_spec.function_name(pipeline)
    sent = None
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        data = jar.read_bytes()  # read once: the bytes sent are those whose digest is checked
        digest = settings.decoder_digest(data)
        if not connect.joined_for(spark.session_id, spark.release_session_on_close, digest):
            log.warning(
                "pipeline %s: records decoded by the reference decoder in Python: the decoder jar %s was replaced "
                "after the job chose its Spark Connect session (an install under way?); the next job uses the new one",
                pipeline.name,
                jar,
            )
            return None
        sent = _send(spark, f"{jar.stem}-{digest[:16]}.jar", data)
    try:
        spark.udf.registerJavaFunction(function, jvm_spec.CLASS, jvm_spec.return_type(pipeline))
        if any(holds(f) for f in pipeline.schema):  # for a statement's values (`sql_transform.statement_sql`)
            spark.udf.registerJavaFunction(jvm_spec.HELD_FUNCTION, jvm_spec.HELD_CLASS, "string")
    except Exception as exc:  # classic and Spark Connect raise different classes; the message is Spark's own
        if jvm_spec.CLASS not in str(exc) and jvm_spec.HELD_CLASS not in str(exc):
            raise
        log.warning(
            "pipeline %s: records decoded by the reference decoder in Python: Spark cannot load the JVM decoder "
            "(%s); spark-submit needs %s on --jars",
            pipeline.name,
            str(exc).splitlines()[0],
            jar,
        )
        return None
    log.info(
        "pipeline %s: records decoded in Spark's JVM (%s), the rest by the reference decoder", pipeline.name, function
    )
    return JvmDecoding(
        function,
        jvm_spec.spec(pipeline, writers, faults.executor_faults(), jar=sent),
        reads_headers=any(f.source == "header" for f in pipeline.schema),
        jar=sent,
    )


def _subjects(pipeline: Pipeline, registry: dict[str, str] | None) -> list[str]:
    """The value subjects of the pipeline's topics, as the registry's default naming (TopicNameStrategy) has them: of
    each topic named, or each registered one whose topic the pattern matches."""
    if pipeline.topic_pattern is None:
        return [f"{topic}-value" for topic in pipeline.topics]
    found = subjects(registry) if registry is not None else []
    return sorted(s for s in found if s.endswith("-value") and pipeline.reads_topic(s.removesuffix("-value")))


def _writer_plans(pipeline: Pipeline, registry: dict[str, str] | None) -> dict[int, dict]:
    """The JVM's plan of each writer schema of its topics' value subjects it can read, by schema id (the registry
    numbers schemas across subjects); the others' reasons logged. A registry that does not answer leaves every
    record to the reference, which asks it again."""
    if registry is None:
        return {}
    try:
        schemas = [
            found
            for subject in _subjects(pipeline, registry)
            for found in subject_schemas(registry, subject, WRITER_VERSIONS)
        ]
    except Exception as exc:  # any failure here only costs speed: the reference decodes and judges every record
        log.warning("pipeline %s: the registry did not list its value subjects' schemas: %s", pipeline.name, exc)
        return {}
    plans = {}
    for schema_id, schema in schemas:
        try:
            if schema.references or (schema.schema_type or "AVRO") != "AVRO":
                raise jvm_avro.LeftToReference("it is no Avro schema of its own (a type or references)")
            plans[schema_id] = jvm_avro.plan(json.loads(schema.schema_str), pipeline)
        except Exception as exc:  # a schema the planner cannot read is the reference's to judge, as any other
            log.info(
                "pipeline %s: values of writer schema id %d are decoded by the reference: %s",
                pipeline.name,
                schema_id,
                exc,
            )
    log.info("pipeline %s: the JVM reads writer schema ids %s", pipeline.name, sorted(plans) or "none")
    return plans


def _send(spark, name: str, data: bytes) -> str:
    """The jar's bytes sent to the Spark Connect session under `name`, one of their content: a session refuses another
    jar of a name it has, and takes the same one again."""
    with tempfile.TemporaryDirectory(prefix="microingest-decoders-") as folder:
        named = Path(folder) / name
        named.write_bytes(data)
        spark.addArtifacts(str(named))
    return name


def refusal(exc: Exception) -> str | None:
    """The decoder's refusal to run in this session, from a batch's failed query, or None when the query failed for
    another reason. Should a job's session hold another build of the decoder (`connect.shared_session_id` says
    why it should not), the decoder refuses the job (`RecordDecoder.checkBuild`), a build older than that check
    refuses the spec it does not know, or Spark refuses the arguments its function does not take. The decoder also
    refuses an Avro writer plan it cannot read (`AvroWriterPlan.java`), which `decode.jvm_avro` should never write:
    the batch goes to the reference rather than failing for good."""
    lines = [line.strip() for line in str(exc).splitlines()]
    return next(
        (
            line
            for line in lines
            if any(mark in line for mark in _REFUSALS) or all(mark in line for mark in _OTHER_ARGUMENTS)
        ),
        None,
    )


def sample_every(records: int) -> int:
    """One record in this many of a batch of `records` is also decoded by the reference, to check the JVM's values."""
    return max(1, records // SAMPLE_RECORDS)


def decoded_frame(frame, jvm: JvmDecoding, every: int):
    """The batch's records (`batch.read_frame`) as the driver collects them (`jvm_collected`), or the executors type
    them for a statement (`jvm_typed`): the position, the JVM's struct `d` (NULL where it declined), and the key, value
    and headers only of the records the reference decodes: those declined and, of those taken, the ones whose offset
    is a multiple of `every`."""
    from pyspark.sql import functions as F

    # The headers' JSON text goes to the function only for a pipeline with fields from headers.
    headers = F.col("headers") if jvm.reads_headers else F.lit(None).cast("string")
    decoded = frame.select(
        "topic",
        "partition",
        "offset",
        "ts_micros",
        "key",
        "value",
        "headers",
        F.call_function(jvm.function, F.col("key"), F.col("value"), headers, F.lit(jvm.spec)).alias("d"),
    )
    raw = f"d IS NULL OR offset % {every} = 0"
    return decoded.selectExpr(
        "topic",
        "partition",
        "offset",
        "ts_micros",
        "d",
        f"CASE WHEN {raw} THEN key END AS key",
        f"CASE WHEN {raw} THEN value END AS value",
        f"CASE WHEN {raw} THEN headers END AS headers",
    )


def distrust(jvm: JvmDecoding, pipeline: Pipeline, exc: Exception) -> None:
    """After a batch's decoding in the JVM failed with `exc`: when the JVM's values differed from the reference's
    (JvmMismatchError) or the session's decoder refused to run (`refusal`), the job's decoding function is
    distrusted, saying why, and the caller decodes the batch by the reference; any other failure is raised again."""
    if isinstance(exc, JvmMismatchError):
        jvm.distrusted = str(exc)
        log.error("%s; this batch and the rest of the job are decoded by the reference decoder alone", exc)
        return
    refused = refusal(exc)
    if refused is None:
        raise exc
    jvm.distrusted = refused
    log.warning(
        "pipeline %s: records decoded by the reference decoder in Python, not Spark's JVM: %s (a new Spark Connect "
        "session, or the server restarted, loads this job's decoder)",
        pipeline.name,
        refused,
    )
