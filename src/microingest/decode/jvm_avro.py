"""Avro writer schemas as the JVM's decoder reads them (`AvroWriterPlan.java`): one plan per writer schema, or the
reason its values must go to the reference (`avro.decode_avro`, fastavro) instead. Pure: a writer schema and a
declaration in, a plan out; which schemas to plan is `spark.jvm_decode`'s question, as it asks the registry.

A plan is a table of the schema's types in fastavro's reading of it (its names resolved as fastavro resolves them,
so a named type may refer to itself), and for each field of the record, the declared field it fills or -1. The JVM
takes a declared field's value as it is (`StrictAvroDecoder.java`): string ← string or enum; integer ← int or long;
double ← float or double; boolean ← boolean; timestamp ← int or long as epoch milliseconds, or long with a
(local-)timestamp-millis or -micros logical type; each alone or in a union with null. A schema is left to the
reference when a declared field is of any other type, a required one is missing, a field name repeats, an array's
items take no bytes (`avro_bounds`), or a logical type appears anywhere else: fastavro turns those values into
Python objects, and may refuse them, by rules the JVM does not repeat. So is a schema that only fastavro would read
as it does: one carrying fastavro's own marks of a parsed schema (whose named types it then takes from the marks, not
the text), a named type called like a primitive, an enum without symbols, a fixed whose size is not a count.
"""

from __future__ import annotations

import json
from typing import Any

from microingest.declare.pipeline import Pipeline
from microingest.decode.avro_bounds import unbounded_array

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
_TAKEN = {
    "string": ("string", "enum"),
    "integer": ("int", "long"),
    "double": ("float", "double"),
    "boolean": ("boolean",),
    "timestamp": ("int", "long"),
}
_FASTAVRO_MARKS = ('"__fastavro_parsed"', '"__named_schemas"')
# µs per unit of a timestamp's logical type, on a long
TIMESTAMP_UNITS = {
    "timestamp-millis": 1000,
    "local-timestamp-millis": 1000,
    "timestamp-micros": 1,
    "local-timestamp-micros": 1,
}


class LeftToReference(Exception):
    """Why the reference decodes this writer schema's values."""


def plan(writer: Any, pipeline: Pipeline) -> dict:
    """The plan the JVM reads `writer`'s values by, for this declaration; LeftToReference when there is none."""
    import fastavro

    if any(mark in json.dumps(writer) for mark in _FASTAVRO_MARKS):
        raise LeftToReference("it carries fastavro's marks of a parsed schema")
    named: dict[str, Any] = {}
    try:
        parsed = fastavro.parse_schema(writer, named_schemas=named)
    except Exception as exc:  # the reference refuses the schema too, and says so
        raise LeftToReference(f"fastavro does not read it: {type(exc).__name__}: {exc}") from None
    if clash := [name for name in named if name.rsplit(".", 1)[-1] in PRIMITIVES]:
        raise LeftToReference(f"a named type is called like a primitive: {clash[0]}")
    if not isinstance(parsed, dict) or parsed.get("type") not in ("record", "error"):
        raise LeftToReference("it is not a record")
    if (path := unbounded_array(writer)) is not None:
        raise LeftToReference(f"it has an array of items that take no bytes (at {path or 'the top'})")
    return _Planner(named, pipeline).root(parsed)


class _Planner:
    def __init__(self, named: dict[str, Any], pipeline: Pipeline):
        self.named = named
        self.pipeline = pipeline
        self.nodes: list[list] = []
        self.indexes: dict[str, int] = {}  # a named type's node

    def root(self, record: dict) -> dict:
        self.nodes.append([])  # the root is node 0
        if isinstance(record.get("name"), str):
            self.indexes[record["name"]] = 0
        declared = {field.name: i for i, field in enumerate(self.pipeline.schema)}
        names = [f["name"] for f in record["fields"]]
        if len(set(names)) != len(names):
            raise LeftToReference("a field name repeats")
        for field in self.pipeline.schema:
            if field.required and field.name not in names:
                raise LeftToReference(f"the required field '{field.name}' is not in it")
        types, at = [], []
        for f in record["fields"]:
            if f["name"] in declared:
                index = declared[f["name"]]
                types.append(self.declared(f["type"], self.pipeline.schema[index].type, f["name"]))
                at.append(index)
            else:
                types.append(self.node(f["type"], f["name"]))
                at.append(-1)
        self.nodes[0] = ["record", types]
        return {"types": self.nodes, "declared": at}

    def declared(self, t: Any, declared: str, path: str) -> int:
        """A declared field's type: one the JVM takes as it is, alone or with null."""
        if isinstance(t, list):
            if len(t) != 2 or t.count("null") != 1 or any(isinstance(branch, list) for branch in t):
                raise LeftToReference(f"field '{path}' is a union other than [null, type]")
            branches = [self.add(["null"]) if b == "null" else self.declared(b, declared, path) for b in t]
            return self.add(["union", branches])
        resolved = self.named.get(t, t) if isinstance(t, str) else t
        kind = resolved if isinstance(resolved, str) else resolved.get("type")
        logical = resolved.get("logicalType") if isinstance(resolved, dict) else None
        if kind not in _TAKEN[declared]:
            raise LeftToReference(f"field '{path}' is {kind}, which the reference turns into {declared}")
        if logical is None:
            return self.node(t, path)
        if declared == "timestamp" and kind == "long" and isinstance(logical, str) and logical in TIMESTAMP_UNITS:
            return self.add(["long", TIMESTAMP_UNITS[logical]])
        raise LeftToReference(f"field '{path}' has the logical type {logical}")

    def node(self, t: Any, path: str) -> int:
        if isinstance(t, str):
            if t in PRIMITIVES:
                return self.add([t])
            if t in self.indexes:
                return self.indexes[t]
            if t not in self.named:
                raise LeftToReference(f"'{path}' names a type fastavro did not define: {t}")
            return self.node(self.named[t], path)
        if isinstance(t, list):
            union = self.add(["union", []])
            self.nodes[union][1] = [self.node(branch, path) for branch in t]
            return union
        if not isinstance(t, dict):
            raise LeftToReference(f"'{path}' has a type fastavro parsed as {type(t).__name__}")
        if "logicalType" in t:
            raise LeftToReference(f"'{path}' has the logical type {t['logicalType']}")
        kind = t.get("type")
        if kind in PRIMITIVES:
            return self.add([kind])
        if kind == "fixed":
            size = t.get("size")
            if type(size) is not int or not 0 <= size < 2**31:
                raise LeftToReference(f"'{path}' is a fixed of size {size!r}")
            return self.named_node(t, ["fixed", size])
        if kind == "enum":
            symbols = t.get("symbols")
            if not isinstance(symbols, list) or not symbols or not all(isinstance(s, str) for s in symbols):
                raise LeftToReference(f"'{path}' is an enum whose symbols are not a list of names")
            return self.named_node(t, ["enum", symbols])
        if kind == "array":
            array = self.add(["array", 0])
            self.nodes[array][1] = self.node(t["items"], f"{path}[]")
            return array
        if kind == "map":
            mapping = self.add(["map", 0])
            self.nodes[mapping][1] = self.node(t["values"], f"{path}{{}}")
            return mapping
        if kind in ("record", "error"):
            record = self.named_node(t, ["record", []])
            self.nodes[record][1] = [self.node(f["type"], f"{path}.{f['name']}") for f in t["fields"]]
            return record
        raise LeftToReference(f"'{path}' is of a type the JVM does not read: {kind}")

    def add(self, node: list) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def named_node(self, t: dict, node: list) -> int:
        """A named type's node, known by its full name before its own fields are planned: they may name it."""
        index = self.add(node)
        if isinstance(t.get("name"), str):
            self.indexes[t["name"]] = index
        return index
