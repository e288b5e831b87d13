"""Writer schemas whose records a hostile value could make endless: an Avro array's block count says how many items
follow, and items of a type that takes no bytes (null, a zero-size fixed, a record of such fields) cost nothing to
"read", so two bytes could ask fastavro for 2^62 of them. Every other item takes at least a byte, which bounds the
count by the value's length. Pure: the schema as JSON in, the first such array's path out.
"""

from __future__ import annotations

from typing import Any


def unbounded_array(schema: Any) -> str | None:
    """The path of the first array in `schema` whose items take no bytes, or None when there is none."""
    empty: dict[str, bool] = {}  # named type -> takes no bytes

    def name(t: dict, takes_none: bool) -> None:
        if isinstance(t.get("name"), str):
            empty[t["name"]] = empty[t["name"].rsplit(".", 1)[-1]] = takes_none
            if isinstance(t.get("namespace"), str):
                empty[f"{t['namespace']}.{t['name']}"] = takes_none

    def takes_no_bytes(t: Any) -> bool:
        if isinstance(t, str):
            return t == "null" or empty.get(t, empty.get(t.rsplit(".", 1)[-1], False))
        if not isinstance(t, dict):
            return False  # a union writes its branch's index: a byte at least
        kind = t.get("type")
        if kind in ("record", "error"):
            name(t, False)  # a record that holds itself needs a union to end, so it takes bytes
            result = all(takes_no_bytes(f.get("type")) for f in t.get("fields", []) if isinstance(f, dict))
            name(t, result)
            return result
        if kind == "fixed":
            name(t, t.get("size") == 0)
            return t.get("size") == 0
        if kind == "enum":
            name(t, False)
        if kind in ("enum", "array", "map"):
            return False  # an index, or a block count: a byte at least
        return takes_no_bytes(kind)

    def walk(t: Any, path: str) -> str | None:
        if isinstance(t, list):
            return next((found for branch in t if (found := walk(branch, path)) is not None), None)
        if not isinstance(t, dict):
            return None
        kind = t.get("type")
        if kind == "array":
            return path if takes_no_bytes(t.get("items")) else walk(t.get("items"), f"{path}[]")
        if kind == "map":
            return walk(t.get("values"), f"{path}{{}}")
        if kind in ("record", "error"):
            takes_no_bytes(t)  # names it, for later references
            for f in t.get("fields", []):
                if isinstance(f, dict) and (found := walk(f.get("type"), f"{path}.{f.get('name')}")) is not None:
                    return found
            return None
        return walk(kind, path) if isinstance(kind, (dict, list)) else None

    return walk(schema, "")
