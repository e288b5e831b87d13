"""Protobuf values as confluent-kafka's own ProtobufSerializer writes them, from classes protoc generated. Each .proto
is compiled and serialized in a process of its own: one Python process cannot load two versions of one file."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from helpers.pipeline_env import REGISTRY_TIMEOUT, SERIALIZER_CONF

PRODUCER = """
import base64, importlib, json, sys
sys.path.insert(0, sys.argv[1])
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf.json_format import ParseDict
Message = getattr(importlib.import_module("event_pb2"), sys.argv[2])
registry, conf, topic, records = json.load(sys.stdin)
serializer = ProtobufSerializer(Message, SchemaRegistryClient(registry), {"use.deprecated.format": False, **conf})
for record in records:
    message = ParseDict(record, Message())
    print(base64.b64encode(serializer(message, SerializationContext(topic, MessageField.VALUE))).decode())
"""


def serialized(
    tmp: Path,
    proto: str,
    registry: dict,
    topic: str,
    records: list[dict],
    imports: dict | None = None,
    conf: dict | None = None,
    message: str = "Event",
) -> list[bytes]:
    """`proto` as event.proto beside its `imports` (name -> text), compiled by protoc, and `records` (in Protobuf's
    JSON form: RFC 3339 timestamps, base64 bytes) serialized as its `message`. The google/type files come from the
    googleapis-common-protos package."""
    for name, text in {"event.proto": proto, **(imports or {})}.items():
        (tmp / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp / name).write_text(text)
    packages = sysconfig.get_paths()["purelib"]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{tmp}",
            f"-I{packages}",
            f"--python_out={tmp}",
            "event.proto",
            *(imports or {}),
        ],
        check=True,
        cwd=tmp,
    )
    given = [{**registry, **REGISTRY_TIMEOUT}, {**SERIALIZER_CONF, **(conf or {})}, topic, records]
    out = subprocess.run(
        [sys.executable, "-c", PRODUCER, str(tmp), message],
        input=json.dumps(given),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    return [base64.b64decode(line) for line in out.stdout.split()]
