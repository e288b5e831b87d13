"""Protobuf writer schemas, with the schemas they import, -> file descriptors, dependencies first.

A registry holds a Protobuf schema in the form its producer registered: a serialized FileDescriptorProto in base64
(Python's serializers) or .proto text (Java's, Go's, the registry's own tools). Text is compiled by protoc, the one
grpcio-tools bundles, in a subprocess. Imports resolve against the schema's references (registered schemas of their
own, under their import names) and against the files producers import without registering them: the well-known
types, google/type and Confluent's own (`seed_pool`).
"""

from __future__ import annotations

import base64
import binascii
import functools
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError as ProtobufDecodeError

from microingest.systems.schema_registry import UnreadableSchemaError

_PROTOC_SECONDS = 60


def from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor a schema registered serialized holds, or None when it is not one (.proto text)."""
    try:
        return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError, ProtobufDecodeError):
        return None


def file_descriptors(sources: dict[str, str], what: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """`sources`: import name -> registered schema (base64 descriptor or .proto text). Returns every file they make,
    each after the files it imports; `what` names the schema in errors."""
    binary, text = {}, {}
    for name, schema in sources.items():
        proto = from_base64(schema)
        if proto is None:
            text[_checked_name(name, what)] = schema
        else:
            proto.name = name
            binary[name] = proto
    if not text:
        return _dependencies_first(list(binary.values()))
    return _compiled(text, list(binary.values()), what)


def _checked_name(name: str, what: str) -> str:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not name.endswith(".proto"):
        raise UnreadableSchemaError(f"{what} imports {name!r}, which is no relative .proto file name")
    return name


def _compiled(text: dict[str, str], binary: list, what: str) -> list[descriptor_pb2.FileDescriptorProto]:
    known = descriptor_pb2.FileDescriptorSet(file=_unregistered_imports() + binary)
    with tempfile.TemporaryDirectory(prefix="microingest-proto-") as tmp:
        root = Path(tmp, "src")
        for name, schema in text.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(schema, encoding="utf-8")
        known_path, out = Path(tmp, "known.pb"), Path(tmp, "out.pb")
        known_path.write_bytes(known.SerializeToString())
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{root}",
            f"--descriptor_set_in={known_path}",
            "--include_imports",
            f"--descriptor_set_out={out}",
            *text,
        ]
        done = subprocess.run(command, capture_output=True, text=True, timeout=_PROTOC_SECONDS)
        if done.returncode != 0:
            problem = (done.stderr or done.stdout).strip().replace(str(root) + "/", "")
            raise UnreadableSchemaError(f"{what} is .proto text protoc cannot compile: {problem[:2000]}")
        return list(descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file)


def seed_pool(pool) -> None:
    """Add the files producers import without registering them: the ones confluent-kafka seeds its pools with (the
    well-known types, most of google/type, Confluent's own), and google/type/decimal.proto, which its serializers
    treat as built in too (all of google/type/ is never registered) but do not seed."""
    from confluent_kafka.schema_registry.common.protobuf import _init_pool
    from google.type import decimal_pb2

    _init_pool(pool)
    pool.AddSerializedFile(decimal_pb2.DESCRIPTOR.serialized_pb)


@functools.cache
def _unregistered_imports() -> list[descriptor_pb2.FileDescriptorProto]:
    """The files a writer schema may import without a reference (`seed_pool`)."""
    files: list[descriptor_pb2.FileDescriptorProto] = []
    seed_pool(
        SimpleNamespace(
            AddSerializedFile=lambda data: files.append(descriptor_pb2.FileDescriptorProto.FromString(data))
        )
    )
    return files


def _dependencies_first(files: list) -> list:
    by_name, ordered, seen = {f.name: f for f in files}, [], set()

    def visit(f) -> None:
        if f.name in seen:
            return
        seen.add(f.name)
        for dependency in f.dependency:
            if dependency in by_name:
                visit(by_name[dependency])
        ordered.append(f)

    for f in files:
        visit(f)
    return ordered
