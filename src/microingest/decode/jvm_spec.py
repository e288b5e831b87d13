"""Records decoded in Spark's JVM: which pipelines may, and what the decoding function is told.

The function is `build/jvm-decoders`' DecodeRecordUdf (StrictJsonDecoder for JSON values, StrictAvroDecoder for
Avro), registered in each Spark session under a name of the pipeline's declaration (`function_name`). It takes a
record only when the reference (`records.RecordProcessor`) would stage exactly the values it gives, and declines
every other record, which then goes to the reference: the rule `arrow_json` and `avro_batch` follow for a whole
batch, applied record by record. It is told the pipeline's declaration as SPEC text, a constant of the query (for
Avro with a plan per writer schema, `jvm_avro`), and answers a struct of the staged key and the declared fields
(`return_type`), timestamps as microseconds; NULL means declined. tests/unit/decode/test_jvm_json.py and
tests/integration/decode/test_jvm_avro.py hold it to the reference on generated and mutated records.
"""

from __future__ import annotations

import hashlib
import json

from microingest.declare.pipeline import Field, Pipeline
from microingest.decode import storable

CLASS = "dev.microingest.decode.DecodeRecordUdf"
# The function that holds a statement's decimal and json values to the reference's rules (HeldValueUdf, `held_spec`):
# one per session, of one return type, told the field by its spec.
HELD_CLASS = "dev.microingest.decode.HeldValueUdf"
HELD_FUNCTION = "microingest_held_in_jvm"
FORMATS = ("json", "avro")
# Each declared type as the function gives it: a timestamp is a number of microseconds, typed by the driver; a
# decimal has the declared precision and scale; a UUID is its 16 bytes; an array is one of its items' type.
SPARK_TYPES = {
    "string": "STRING",
    "integer": "BIGINT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "BIGINT",
    "decimal": "DECIMAL({precision},{scale})",
    "date": "DATE",
    "uuid": "BINARY",
    "bytes": "BINARY",
    "json": "STRING",
}
# What each format's decoder reads: these types in the value (JSON at any path, bytes as base64 text, json as its
# staged text; Avro in records nested however deep, `jvm_avro` planning each writer schema's way to them or leaving it
# to the reference); arrays of these items but timestamps and UUIDs (staged in Postgres' binary array form,
# `batch_columns.pg_array`, which the driver alone writes); text and bytes from the key and headers.
SCALARS = frozenset({"string", "integer", "double", "boolean", "timestamp", "decimal", "date", "uuid", "bytes", "json"})
ITEMS = SCALARS - {"timestamp", "uuid", "bytes", "json"}  # declarations have no arrays of bytes or json
FROM_RECORD = frozenset({"string", "bytes"})
MICROS_PER_MS = 1000
_FAULT_KEYS = {"fault": "MICROINGEST_FAULT", "fault_once": "MICROINGEST_FAULT_ONCE"}


def declines_pipeline(pipeline: Pipeline) -> str | None:
    """Why no record of this pipeline may be decoded in the JVM, or None when they may."""
    if pipeline.value_format not in FORMATS:
        return f"its values are {pipeline.value_format}"
    if pipeline.key_format != "string":
        return f"its keys are {pipeline.key_format}"
    if pipeline.transform is not None:
        return "it has a transform (Python code)"
    odd = [f.name for f in pipeline.schema if not _reads(f)]
    if odd:
        return f"fields of types or paths the JVM decoder does not read: {', '.join(odd)}"
    crossing = _crossing(pipeline.schema)
    if crossing:
        return f"fields whose paths cross another's: {', '.join(crossing)}"
    return None


def _reads(field: Field) -> bool:
    if field.source != "value":
        return field.type in FROM_RECORD
    if field.type == "array":
        return field.kind in ITEMS
    return field.type in SCALARS


def _crossing(schema: tuple[Field, ...]) -> list[str]:
    """Fields whose paths the JVM's single pass cannot follow (PathTree.java): one running through or ending at
    another's, or two index steps below the top naming one element ("1" and "01")."""
    paths = [(f.name, f.at) for f in schema if f.source == "value"]
    crossing = []
    for name, at in paths:
        for other, there in paths:
            if other == name:
                continue
            shared = next((i for i, (a, b) in enumerate(zip(at, there)) if a != b), min(len(at), len(there)))
            if shared == min(len(at), len(there)) or (
                shared > 0 and _index(at[shared]) is not None and _index(at[shared]) == _index(there[shared])
            ):
                crossing.append(name)
                break
    return crossing


def _index(step: str) -> int | None:
    """An index step's element as PathTree.java numbers it (past 2**31 - 1 all one: no array is that long)."""
    if not (step.isascii() and step.isdigit()):
        return None
    digits = step.lstrip("0") or "0"
    return 2**31 - 1 if len(digits) > 10 else min(int(digits), 2**31 - 1)


def spec(
    pipeline: Pipeline,
    writers: dict[int, dict] | None = None,
    fault: dict[str, str] | None = None,
    jar: str | None = None,
) -> str:
    """The declaration as the decoding function reads it (RecordSpec.java); `writers`: for Avro, the plan of each
    writer schema whose values the JVM reads (`jvm_avro.plan`), by schema id; `fault`: a fault-injection test's
    executor fault settings (`faults.executor_faults`), which travel to the executors inside the spec; `jar`: the
    file name of the decoder's jar the job sent its Spark Connect session, which the function checks it runs."""
    fault = fault or {}
    return json.dumps(
        {
            "format": pipeline.value_format,
            "max_value_bytes": pipeline.max_value_bytes,
            "key_required": pipeline.sink_mode == "upsert_latest",
            # Whole milliseconds within the storable instants: the reference converts them by integer arithmetic.
            "timestamp_ms": [
                -(-storable.MIN_EPOCH_MICROS // MICROS_PER_MS),
                storable.MAX_EPOCH_MICROS // MICROS_PER_MS,
            ],
            "timestamp_us": [storable.MIN_EPOCH_MICROS, storable.MAX_EPOCH_MICROS],
            "fields": [_field(f) for f in pipeline.schema],
            **({"writers": _by_id(writers or {})} if pipeline.value_format == "avro" else {}),
            **{key: fault[env] for key, env in _FAULT_KEYS.items() if env in fault},
            **({"jar": jar} if jar else {}),
        },
        separators=(",", ":"),
    )


def held_spec(field: Field, jar: str | None = None) -> str:
    """A decimal, decimal array or json field as the held function reads it (HeldValue.java): the value a statement
    gives it is held as `held_values.held` holds it, or left to that function; `jar` as `spec`'s."""
    held = {"name": "held", **{k: v for k, v in _field(field).items() if k in _HELD_KEYS}}  # no user's text
    return json.dumps({"field": held, **({"jar": jar} if jar else {})}, separators=(",", ":"))


_HELD_KEYS = ("type", "required", "items", "precision", "scale", "rounding")


def _field(field: Field) -> dict:
    written: dict = {"name": field.name, "type": field.type, "required": field.required}
    if field.type == "array":
        written["items"] = field.kind
    if field.kind == "decimal":
        written.update(precision=field.precision, scale=field.scale, rounding=field.rounding)
    if field.path:
        written["path"] = list(field.path)
    if field.source != "value":
        written["source"] = field.source
    if field.header is not None:
        written["header"] = field.header
    return written


def _by_id(writers: dict[int, dict]) -> dict[str, dict]:
    return {str(schema_id): plan for schema_id, plan in sorted(writers.items())}


def function_name(pipeline: Pipeline) -> str:
    """The function's name in a session for this declaration's field types. Sessions are shared between jobs and the
    function's return type follows the types, so declarations of other types never share a name; those of the same
    types share one function, told apart by the spec each passes."""
    digest = hashlib.sha256(return_type(pipeline).encode()).hexdigest()[:16]
    return f"microingest_decode_{digest}"


def return_type(pipeline: Pipeline) -> str:
    """The function's struct: the staged key, then one column per declared field, by position (f0, f1, ...)."""
    return "struct<key:string," + ",".join(f"f{i}:{_spark_type(f)}" for i, f in enumerate(pipeline.schema)) + ">"


def _spark_type(field: Field) -> str:
    kind = SPARK_TYPES[field.kind].format(precision=field.precision, scale=field.scale)
    return f"ARRAY<{kind}>" if field.type == "array" else kind
