"""Avro writer schemas as the JVM's decoder reads them (`AvroWriterPlan.java`): one plan per writer schema, or the
reason its values must go to the reference (`avro.decode_avro`, fastavro) instead. Pure: a writer schema and a
declaration in, a plan out; which schemas to plan is `spark.jvm_decode`'s question, as it asks the registry.

A plan is a table of the schema's types in fastavro's reading of it (its names resolved as fastavro resolves them,
so a named type may refer to itself), and for each field of the record, the declared field it fills, -1, or the same
for a nested record on the way to declared fields. The JVM takes a declared field's value as the reference's
converters take what fastavro gives (`StrictAvroDecoder.java`, `_TAKEN` below), each alone or in a union with null; an
array's items so too. A schema is left to the reference when a declared field is of any other type or behind
anything but records, a required one is missing, a field name repeats, an array's items take no bytes
(`avro_bounds`), or a logical type appears anywhere but on a declared field that takes it: fastavro turns those values
into Python objects, and may refuse them, by rules the JVM does not repeat. So is a schema that only fastavro would
read as it does: one carrying fastavro's own marks of a parsed schema (whose named types it then takes from the marks,
not the text), a named type called like a primitive, an enum without symbols, a fixed whose size is not a count.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from microingest.declare.pipeline import Field, Pipeline
from microingest.decode.avro_bounds import unbounded_array

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
# The writer's types each declared type takes without a logical type, as fastavro's values go through `converters`
# (a string as the type's text; a number as epoch milliseconds, or a decimal's exact value).
_TAKEN = {
    "string": ("string", "enum"),
    "integer": ("int", "long"),
    "double": ("float", "double"),
    "boolean": ("boolean",),
    "timestamp": ("int", "long", "string"),
    "decimal": ("int", "long", "float", "double", "string"),
    "date": ("string",),
    "uuid": ("string",),
    "bytes": ("bytes", "fixed"),
}
# fastavro's precision is its decimal context's: past this the JVM leaves the schema to it (Python's Emax and the like)
MAX_DECIMAL_PRECISION = 1000
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
        self.json_indexes: dict[str, int] = {}  # the same, as a json field's value

    def root(self, record: dict) -> dict:
        # The root is node 0, not its named type's node: a field naming the type gets a copy to skip, planned as any
        # other (a declared field's node reads a logical type's value, which fastavro may refuse in the copy).
        self.nodes.append([])
        wanted = [(i, field.at) for i, field in enumerate(self.pipeline.schema) if field.source == "value"]
        types, mapped = self.fields(record, wanted, "")
        self.nodes[0] = ["record", types]
        return {"types": self.nodes, "declared": mapped}

    def fields(self, record: dict, wanted: list[tuple[int, tuple[str, ...]]], where: str) -> tuple[list, list]:
        """A record's field types, and what each fills of the declared fields `wanted` (index, path from here)."""
        names = [f["name"] for f in record["fields"]]
        if len(set(names)) != len(names):
            raise LeftToReference(f"a field name repeats{where and f' in {where}'}")
        for index, at in wanted:
            field = self.pipeline.schema[index]
            if at[0] not in names and field.required:
                raise LeftToReference(f"the required field '{field.name}' is not in it")
        types: list[int] = []
        mapped: list[int | list] = []
        for f in record["fields"]:
            path = f"{where}.{f['name']}" if where else f["name"]
            here = [(index, at[1:]) for index, at in wanted if at[0] == f["name"]]
            if not here:
                types.append(self.node(f["type"], path))
                mapped.append(-1)
            elif len(here) == 1 and not here[0][1]:
                index = here[0][0]
                types.append(self.declared(f["type"], self.pipeline.schema[index], path))
                mapped.append(index)
            else:  # crossing paths are declined with the pipeline (`jvm_spec._crossing`): every one goes on
                nested, below = self.nested(f["type"], here, path)
                types.append(nested)
                mapped.append(below)
        return types, mapped

    def nested(self, t: Any, wanted: list[tuple[int, tuple[str, ...]]], path: str) -> tuple[int, list]:
        """A record on the way to declared fields, alone or with null: its node of its own (its declared fields'
        nodes are not its named type's), and what its fields fill."""
        branches = t if isinstance(t, list) else [t]
        if isinstance(t, list) and (len(branches) != 2 or branches.count("null") != 1):
            raise LeftToReference(f"'{path}' is a union other than [null, record] on the way to declared fields")
        [branch] = [b for b in branches if b != "null"] or [None]
        resolved = self.named.get(branch, branch) if isinstance(branch, str) else branch
        if not isinstance(resolved, dict) or resolved.get("type") not in ("record", "error"):
            kind = resolved.get("type") if isinstance(resolved, dict) else resolved
            raise LeftToReference(f"'{path}' is {kind}, not a record, on the way to declared fields")
        record = self.add(["record", []])
        self.nodes[record][1], below = self.fields(resolved, wanted, path)
        if not isinstance(t, list):
            return record, below
        return self.add(["union", [record if b != "null" else self.add(["null"]) for b in branches]]), below

    def declared(self, t: Any, field: Field, path: str) -> int:
        """A declared field's type: one the JVM takes as it is, alone or with null; an array of such items; for json,
        any the JVM writes as JSON text."""
        if field.type == "json":
            return self.node(t, path, as_json=True)
        if field.type != "array":
            return self.nullable(t, path, lambda branch: self.leaf(branch, field.type, path))
        return self.nullable(t, path, lambda branch: self.array(branch, field.kind, path))

    def nullable(self, t: Any, path: str, planned: Callable[[Any], int]) -> int:
        if not isinstance(t, list):
            return planned(t)
        if len(t) != 2 or t.count("null") != 1 or any(isinstance(branch, list) for branch in t):
            raise LeftToReference(f"field '{path}' is a union other than [null, type]")
        return self.add(["union", [self.add(["null"]) if b == "null" else planned(b) for b in t]])

    def array(self, t: Any, items: str, path: str) -> int:
        resolved = self.named.get(t, t) if isinstance(t, str) else t
        if not isinstance(resolved, dict) or resolved.get("type") != "array" or "logicalType" in resolved:
            raise LeftToReference(f"field '{path}' is no array, which the reference turns into an array")
        array = self.add(["array", 0])
        self.nodes[array][1] = self.nullable(resolved["items"], f"{path}[]", lambda b: self.leaf(b, items, path))
        return array

    def leaf(self, t: Any, declared: str, path: str) -> int:
        resolved = self.named.get(t, t) if isinstance(t, str) else t
        kind = resolved if isinstance(resolved, str) else resolved.get("type")
        logical = resolved.get("logicalType") if isinstance(resolved, dict) else None
        if logical is None:
            if kind not in _TAKEN[declared]:
                raise LeftToReference(f"field '{path}' is {kind}, which the reference turns into {declared}")
            return self.node(t, path)
        if declared == "timestamp" and kind == "long" and isinstance(logical, str) and logical in TIMESTAMP_UNITS:
            return self.add(["long", TIMESTAMP_UNITS[logical]])
        if declared == "date" and kind == "int" and logical == "date":
            return self.add(["date"])
        if declared == "uuid" and kind == "string" and logical == "uuid":
            return self.add(["string"])  # fastavro's UUID() of the text, then its text again: the JVM reads the text
        if declared == "decimal" and kind in ("bytes", "fixed") and logical == "decimal":
            return self.add(_decimal(resolved, path))
        raise LeftToReference(f"field '{path}' has the logical type {logical}")

    def node(self, t: Any, path: str, as_json: bool = False) -> int:
        """A type's node: one the JVM skips, or (`as_json`) one it writes as a declared json field's text. Each has
        its named types' nodes of its own: a skipped value is never a logical type's, which fastavro may refuse."""
        indexes = self.json_indexes if as_json else self.indexes
        if isinstance(t, str):
            if t in PRIMITIVES:
                return self.add([t])
            if t in indexes:
                return indexes[t]
            if t not in self.named:
                raise LeftToReference(f"'{path}' names a type fastavro did not define: {t}")
            return self.node(self.named[t], path, as_json)
        if isinstance(t, list):
            union = self.add(["union", []])
            self.nodes[union][1] = [self.node(branch, path, as_json) for branch in t]
            return union
        if not isinstance(t, dict):
            raise LeftToReference(f"'{path}' has a type fastavro parsed as {type(t).__name__}")
        kind = t.get("type")
        if "logicalType" in t:
            logical = t["logicalType"]
            if not as_json:
                raise LeftToReference(f"'{path}' has the logical type {logical}")
            if (kind, logical) in (("bytes", "decimal"), ("fixed", "decimal")):
                return self.named_node(t, _decimal(t, path), as_json)
            if (kind, logical) in (("int", "date"), ("string", "uuid")):
                return self.add([logical])
            raise LeftToReference(f"'{path}' (json) has the logical type {logical}")
        if kind in PRIMITIVES:
            return self.node(kind, path, as_json)
        if kind == "fixed":
            return self.named_node(t, ["fixed", _fixed_size(t, path)], as_json)
        if kind == "enum":
            symbols = t.get("symbols")
            if not isinstance(symbols, list) or not symbols or not all(isinstance(s, str) for s in symbols):
                raise LeftToReference(f"'{path}' is an enum whose symbols are not a list of names")
            return self.named_node(t, ["enum", symbols], as_json)
        if kind == "array":
            array = self.add(["array", 0])
            self.nodes[array][1] = self.node(t["items"], f"{path}[]", as_json)
            return array
        if kind == "map":
            mapping = self.add(["map", 0])
            self.nodes[mapping][1] = self.node(t["values"], f"{path}{{}}", as_json)
            return mapping
        if kind in ("record", "error"):
            names = [f["name"] for f in t["fields"]]
            if as_json and len(set(names)) != len(names):
                raise LeftToReference(f"a field name repeats in '{path}' (json)")
            record = self.named_node(t, ["record", [], names] if as_json else ["record", []], as_json)
            self.nodes[record][1] = [self.node(f["type"], f"{path}.{f['name']}", as_json) for f in t["fields"]]
            return record
        raise LeftToReference(f"'{path}' is of a type the JVM does not read: {kind}")

    def add(self, node: list) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def named_node(self, t: dict, node: list, as_json: bool = False) -> int:
        """A named type's node, known by its full name before its own fields are planned: they may name it."""
        index = self.add(node)
        if isinstance(t.get("name"), str):
            (self.json_indexes if as_json else self.indexes)[t["name"]] = index
        return index


def _decimal(t: dict, path: str) -> list:
    """A decimal logical type's node: ["decimal", [precision, scale]] on bytes, ["fixed-decimal", [size, precision,
    scale]] on a fixed."""
    precision, scale = t.get("precision"), t.get("scale", 0)
    if not (type(precision) is int and type(scale) is int and 0 <= scale <= precision <= MAX_DECIMAL_PRECISION):
        raise LeftToReference(f"'{path}' is a decimal of precision {precision!r} and scale {scale!r}")
    if precision == 0:
        raise LeftToReference(f"'{path}' is a decimal of precision 0")
    if t["type"] == "bytes":
        return ["decimal", [precision, scale]]
    return ["fixed-decimal", [_fixed_size(t, path), precision, scale]]


def _fixed_size(t: dict, path: str) -> int:
    size = t.get("size")
    if type(size) is not int or not 0 <= size < 2**31:
        raise LeftToReference(f"'{path}' is a fixed of size {size!r}")
    return size
