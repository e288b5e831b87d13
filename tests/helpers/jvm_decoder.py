"""The JVM's decoders (build/jvm-decoders, built by `make install`) run without Spark, on records given here:
`DecodeLines` reads them as hex and answers each record's staged key and values, or None where it declines."""

from __future__ import annotations

import json
import struct
import subprocess
import uuid
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pyspark
import pytest

from helpers.reference_check import same
from microingest import settings
from microingest.declare.pipeline import Pipeline
from microingest.decode import jvm_spec
from microingest.decode.records import BadRecord, RecordProcessor

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def classpath() -> str:
    jar = settings.decoder_jar()
    assert jar is not None, "no decoder jar: `make install` builds build/jvm-decoders"
    # jackson-core is Spark's own: the jar runs against what pyspark ships.
    [jackson] = sorted((Path(pyspark.__file__).parent / "jars").glob("jackson-core-2.*.jar"))
    return f"{jar}:{jackson}"


def jvm_decoded(
    pipeline: Pipeline, records: list[tuple[bytes | None, bytes | None]], writers: dict[int, dict] | None = None
) -> list[tuple | None]:
    """Per record: (record_key, False, *values) as the reference stages rows, or None where the JVM declined;
    `writers`: an Avro pipeline's writer plans (`jvm_avro.plan`) by schema id."""
    lines = "".join(f"{_hex(key)} {_hex(value)}\n" for key, value in records)
    done = subprocess.run(
        ["java", "-cp", classpath(), "dev.microingest.decode.DecodeLines", jvm_spec.spec(pipeline, writers)],
        input=lines,
        capture_output=True,
        text=True,
        check=True,
    )
    answers = [json.loads(line) for line in done.stdout.split("\n")[:-1]]  # not splitlines(): U+2028 is text
    assert len(answers) == len(records), done.stderr
    types = [f.type for f in pipeline.schema]
    return [None if a is None else (a[0], False, *map(_typed, types, a[1:])) for a in answers]


def _hex(data: bytes | None) -> str:
    return "-" if data is None else data.hex()


def _typed(type_: str, value):
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
    return value


def compared(
    pipeline: Pipeline,
    records: list[tuple[bytes | None, bytes | None]],
    registry: dict[str, str] | None = None,
    writers: dict[int, dict] | None = None,
) -> list[bool]:
    """Per record, whether the JVM took it; fails on any record it took that the reference would not stage exactly
    so."""
    reference = RecordProcessor(pipeline, registry)
    taken = []
    for (key, value), got in zip(records, jvm_decoded(pipeline, records, writers), strict=True):
        if got is None:
            taken.append(False)
            continue
        try:
            expected = reference.process(key, value)
        except BadRecord as exc:
            pytest.fail(f"the JVM took {key!r} {value!r}, which the reference refuses: {exc}")
        assert len(got) == len(expected) and all(map(same, got, expected)), (key, value, got, expected)
        taken.append(True)
    return taken
