"""The JVM's decoders (build/jvm-decoders, built by `make install`) run without Spark, on records given here:
`DecodeLines` reads them as hex and answers each record's staged key and values, or None where it declines."""

from __future__ import annotations

import base64
import json
import struct
import subprocess
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest

from helpers.hostile_records import SCHEMA, kafka_batch
from helpers.reference_check import same
from microingest import settings
from microingest.declare.pipeline import Field, Pipeline
from microingest.declare.validate import parse_pipeline
from microingest.decode import jvm_spec
from microingest.decode.json_values import json_text
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.decode.staged_rows import kafka_headers

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def classpath() -> str:
    jar = settings.decoder_jar()
    assert jar is not None, "no decoder jar: `make install` builds build/jvm-decoders"
    # jackson-core is Spark's own: the jar runs against what pyspark ships.
    [jackson] = sorted((Path(pyspark.__file__).parent / "jars").glob("jackson-core-2.*.jar"))
    return f"{jar}:{jackson}"


def jvm_decoded(pipeline: Pipeline, records: list[tuple], writers: dict[int, dict] | None = None) -> list[tuple | None]:
    """Per (key, value[, headers]) record: (record_key, False, *values) as the reference stages rows, or None where
    the JVM declined; headers as the batch's frame has them (Spark's to_json, `spark_headers`); `writers`: an Avro
    pipeline's writer plans (`jvm_avro.plan`) by schema id."""
    lines = "".join(
        f"{_hex(r[0])} {_hex(r[1])} {_hex(r[2].encode() if len(r) > 2 and r[2] else None)}\n" for r in records
    )
    done = subprocess.run(
        ["java", "-cp", classpath(), "dev.microingest.decode.DecodeLines", jvm_spec.spec(pipeline, writers)],
        input=lines,
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.split("\n")[:-1]]  # not splitlines(): U+2028 is text
    assert len(answers) == len(records), done.stderr
    return [None if a is None else (a[0], False, *map(_typed, pipeline.schema, a[1:])) for a in answers]


def spark_headers(headers: list[tuple[str, bytes | None]]) -> str | None:
    """Kafka headers as the batch's frame carries them: Spark's to_json, NULL for none (`batch.read_frame`)."""
    if not headers:
        return None
    return json.dumps(
        [{"key": k, **({} if v is None else {"value": base64.b64encode(v).decode()})} for k, v in headers]
    )


def _staged(field: Field, value):
    """A json field's value as its staged text, which the JVM gives."""
    return json_text(value) if field.type == "json" and value is not None else value


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def _typed(field: Field, value):
    if value is None:
        return None
    if field.type == "array":
        return [_scalar(field.kind, item) for item in value]
    return _scalar(field.type, value)


def _scalar(type_: str, value):
    if value is None:
        return None
    if type_ == "double":
        return struct.unpack(">d", bytes.fromhex(value.rjust(16, "0")))[0]
    if type_ == "timestamp":
        return EPOCH + timedelta(microseconds=value)
    if type_ == "decimal":
        return Decimal(value)  # its plain text, every digit of its scale
    if type_ == "date":
        return date.fromisoformat(value)
    if type_ == "uuid":
        return uuid.UUID(hex=value)
    if type_ == "bytes":
        return bytes.fromhex(value)
    return value


def compared(
    pipeline: Pipeline,
    records: list[tuple],
    registry: dict[str, str] | None = None,
    writers: dict[int, dict] | None = None,
) -> list[bool]:
    """Per record, whether the JVM took it; fails on any record it took that the reference would not stage exactly
    so."""
    reference = RecordProcessor(pipeline, registry)
    taken = []
    for record, got in zip(records, jvm_decoded(pipeline, records, writers), strict=True):
        if got is None:
            taken.append(False)
            continue
        key, value = record[:2]
        try:
            expected = reference.process(key, value, kafka_headers(record[2] if len(record) > 2 else None))
        except BadRecord as exc:
            pytest.fail(f"the JVM took {key!r} {value!r}, which the reference refuses: {exc}")
        staged = (*expected[:2], *(_staged(f, v) for f, v in zip(pipeline.schema, expected[2:], strict=True)))
        assert len(got) == len(staged) and all(map(same, got, staged)), (record, got, staged)
        taken.append(True)
    return taken


SPARK_TYPES = {"string": pa.string(), "integer": pa.int64(), "double": pa.float64(), "boolean": pa.bool_()}


def hostile_pipeline(**changes) -> Pipeline:
    """A pipeline of the hostile records' schema (`hostile_records.SCHEMA`)."""
    return parse_pipeline({"name": "p", "topic": "t", "target_table": "t", "schema": SCHEMA, **changes})


def as_spark_collects(p, records, every: int) -> pa.Table:
    """The table `jvm_decode.decoded_frame` gives the driver for these records at offsets 0.. of partition 0."""
    read = kafka_batch("t", 0, range(len(records)), records)
    answers = jvm_decoded(p, [(r[0], r[1]) for r in records])
    fields = [pa.field("key", pa.string())] + [
        pa.field(f"f{i}", SPARK_TYPES.get(f.type, pa.int64())) for i, f in enumerate(p.schema)
    ]
    d = pa.array(
        [None if a is None else dict(zip((f.name for f in fields), _spark_values(p, a))) for a in answers],
        pa.struct(fields),
    )
    raw = [a is None or offset % every == 0 for offset, a in enumerate(answers)]
    keep = pa.array(raw)
    return pa.table(
        {
            "topic": read.column("topic"),
            "partition": read.column("partition"),
            "offset": read.column("offset"),
            "ts_micros": read.column("ts_micros"),
            "d": d,
            "key": pa.compute.if_else(keep, read.column("key"), None),
            "value": pa.compute.if_else(keep, read.column("value"), None),
            "headers": pa.compute.if_else(keep, read.column("headers"), None),
        }
    )


def _spark_values(p, answer):
    key, _tombstone, *values = answer
    out = [key]
    for field, value in zip(p.schema, values):
        if field.type == "timestamp" and value is not None:
            value = (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // pa.scalar(1, pa.duration("us")).as_py()
        out.append(value)
    return out
