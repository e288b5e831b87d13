"""A registered Protobuf schema -> its file descriptor, imports resolved through the registry.

The registry holds the file in the form its producer registered (a serialized FileDescriptorProto, or .proto text that
`proto_files` compiles) and names the schemas it imports as references. Each writer schema is built into a descriptor
pool of its own, beside the files producers import without registering them, so any number of versions of one file
live side by side. The decoder takes its messages from it, and `microingest schema` its fields.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool

from microingest.systems.proto_files import file_descriptors, from_base64, seed_pool
from microingest.systems.schema_registry import UnreadableSchemaError, referenced_schema

_FILES: dict[tuple[str, int], Any] = {}


def writer_file(registry: dict[str, str], schema_id: int, schema) -> tuple[Any, descriptor_pb2.FileDescriptorProto]:
    """The writer's file descriptor and its proto (which keeps the messages' order)."""
    key = (registry["url"], schema_id)
    if key not in _FILES:
        main = (
            from_base64(schema.schema_str) or descriptor_pb2.FileDescriptorProto()
        ).name or f"schema_{schema_id}.proto"
        what = f"writer schema id {schema_id}"
        pool = descriptor_pool.DescriptorPool()
        seed_pool(pool)
        files = file_descriptors({main: schema.schema_str, **_references(registry, schema)}, what)
        for proto in files:
            try:
                pool.FindFileByName(proto.name)
                continue  # one of the files the pool starts with
            except KeyError:
                pass
            try:
                pool.AddSerializedFile(proto.SerializeToString())
            except Exception as exc:  # an import none of those provide: not the record's fault
                raise UnreadableSchemaError(
                    f"{what} cannot be built into a descriptor ({proto.name}): {type(exc).__name__}: {exc}"
                ) from None
        _FILES[key] = pool.FindFileByName(main), next(f for f in files if f.name == main)
    return _FILES[key]


def _references(registry: dict[str, str], schema, found: dict[str, str] | None = None) -> dict[str, str]:
    """Import name -> registered schema, of every schema `schema` refers to, however deep."""
    found = {} if found is None else found
    for reference in schema.references or ():
        if reference.name not in found:
            referenced = referenced_schema(registry, reference.subject, reference.version)
            found[reference.name] = referenced.schema_str
            _references(registry, referenced, found)
    return found
