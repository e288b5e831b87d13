"""Writer schemas as the JVM's plans (`decode.jvm_avro`): the odd schemas fastavro reads its own way go to the
reference, and every plan written is one the JVM's decoder accepts (a plan it refused would fail every batch). The
plans' values are held to the reference in tests/integration/decode/test_jvm_avro.py, under a real registry."""

from __future__ import annotations

import subprocess
from datetime import datetime, timezone

import pytest

from helpers.jvm_decoder import jvm_decoded
from microingest.declare.validate import parse_pipeline
from microingest.decode import jvm_avro
from microingest.spark.jvm_decode import refusal

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}


def pipeline(**schema):
    return parse_pipeline(
        {
            "name": "p",
            "topic": "t",
            "target_table": "t",
            "value_format": "avro",
            "schema": schema or {"s": "string", "at": "timestamp"},
        }
    )


def record(*fields, name="R", **extra) -> dict:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields], **extra}


PLANNED = [
    record(("s", "string"), ("at", {"type": "long", "logicalType": "timestamp-micros"})),
    record(("s", ENUM), ("again", "E"), ("at", ["null", "long"])),
    record(("next", ["null", "R"]), ("s", {"type": "string"}), ("f", {"type": "fixed", "name": "F", "size": 0})),
    record(("m", {"type": "map", "values": ["null", "R", {"type": "array", "items": ["int", "float"]}]}), ("s", "E2")),
]
PLANNED[3]["fields"].insert(0, {"name": "e", "type": {"type": "enum", "name": "E2", "symbols": ["X"]}})
LEFT = [
    # fastavro's marks of a parsed schema: it takes the named types from __named_schemas, not from the text
    (
        record(
            ("a", ENUM),
            ("s", "E"),
            __fastavro_parsed=True,
            __named_schemas={"E": {"type": "enum", "name": "E", "symbols": ["B", "A"]}},
        ),
        "marks",
    ),
    (record(("s", ["null", ["null", "string"]])), "union"),
    (record(("s", "string"), ("e", {"type": "enum", "name": "E", "symbols": []})), "symbols"),
    (record(("s", "long"), ("e", {"type": "enum", "name": "long", "symbols": ["A"]})), "primitive"),
    (record(("s", "string"), ("f", {"type": "fixed", "name": "F", "size": True})), "size"),
    (record(("s", "string"), ("at", {"type": "long", "logicalType": ["timestamp-millis"]})), "logical"),
    (record(("s", "string"), ("d", {"type": "int", "logicalType": "date"})), "logical type date"),
]


@pytest.mark.parametrize("schema, why", LEFT)
def test_schemas_fastavro_reads_its_own_way_go_to_the_reference(schema, why):
    with pytest.raises(jvm_avro.LeftToReference, match=why):
        jvm_avro.plan(schema, pipeline())


def test_every_plan_written_is_one_the_jvm_decoder_accepts():
    p = pipeline()
    plans = {i: jvm_avro.plan(schema, p) for i, schema in enumerate(PLANNED)}
    # DecodeLines reads the spec before any record: a plan it refused would end it with an error here
    value = b"\x00\x00\x00\x00\x00" + b"\x02a" + b"\x00"  # schema 0: s "a", at 0 µs
    assert jvm_decoded(p, [(b"k", value)], plans) == [("k", False, "a", EPOCH)]


def test_named_types_that_hold_themselves_refer_to_one_node():
    plan = jvm_avro.plan(PLANNED[2], pipeline())
    root_fields = plan["types"][0][1]
    union = plan["types"][root_fields[0]]
    # "R" in a field is a copy of the root to skip (the root's own nodes read its declared fields); it holds itself
    copy = union[1][1]
    assert union[0] == "union" and copy != 0 and plan["types"][copy][0] == "record"
    copy_next = plan["types"][plan["types"][copy][1][0]]
    assert copy_next[0] == "union" and copy_next[1][1] == copy
    assert plan["declared"] == [-1, 0, -1]


def test_a_copy_of_the_root_with_a_logical_type_or_a_one_branch_union_on_a_path_is_left_to_the_reference():
    """fastavro converts the copy's logical values, and may refuse them, where the JVM would skip them; a union of
    one branch still has its index on the wire."""
    nested = record(
        ("s", "string"), ("at", {"type": "long", "logicalType": "timestamp-millis"}), ("next", ["null", "R"])
    )
    with pytest.raises(jvm_avro.LeftToReference, match="logical type timestamp-millis"):
        jvm_avro.plan(nested, pipeline())
    one_branch = record(("s", "string"), ("n", [record(("x", "long"), name="Inner")]))
    with pytest.raises(jvm_avro.LeftToReference, match="union other than"):
        jvm_avro.plan(one_branch, pipeline(s="string", x={"type": "integer", "path": "n.x"}))


def test_a_plan_that_would_skip_a_logical_value_or_write_a_time_as_json_is_refused_by_the_jvm():
    p = pipeline(s="string", j="json")
    skipped_date = {"types": [["record", [1, 2]], ["string"], ["date"]], "declared": [0, -1]}
    time_json = {"types": [["record", [1, 2]], ["string"], ["long", 1000]], "declared": [0, 1]}
    unnamed_json = {"types": [["record", [1, 2]], ["string"], ["record", [1]]], "declared": [0, 1]}
    for plan in (skipped_date, time_json, unnamed_json):
        with pytest.raises(subprocess.CalledProcessError) as refused:
            jvm_decoded(p, [(b"k", b"\x00\x00\x00\x00\x00\x02a\x00")], {0: plan})
        assert "which cannot hold it" in refused.value.stderr


def test_a_plan_the_jvm_refuses_sends_the_batch_to_the_reference_rather_than_failing_it():
    failed = Exception("Job aborted.\n  java.lang.IllegalArgumentException: node 3 of an Avro writer plan is malformed")
    assert refusal(failed) == "java.lang.IllegalArgumentException: node 3 of an Avro writer plan is malformed"
    assert refusal(Exception("Connection reset by peer")) is None
