"""Declared fields derived from a registered writer schema (`schema: {from_registry: ...}`, `microingest schema`),
against the real registry."""

import json
import os
import subprocess

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from test_avro import V1, V2

from helpers.pipeline_env import REGISTRY_TIMEOUT
from microingest.declare.files import load_pipeline_file


def test_a_declaration_takes_its_fields_from_the_registry_and_the_cli_prints_them(env, registry):
    client = SchemaRegistryClient({**registry, **REGISTRY_TIMEOUT})
    subject = f"{env.topic}-value"
    client.register_schema(subject, Schema(json.dumps(V1), "AVRO"))
    env.redeclare(value_format="avro", schema={"from_registry": {"subject": subject, "version": 1}})
    assert [(f.name, f.type, f.required) for f in env.pipeline.schema] == [
        ("event_id", "string", True),
        ("amount", "double", True),
        ("event_time", "timestamp", True),
    ]

    client.register_schema(subject, Schema(json.dumps(V2), "AVRO"))
    env.redeclare(schema={"from_registry": {"subject": subject}})  # latest: version 2
    assert [(f.name, f.type, f.required) for f in env.pipeline.schema][3:] == [
        ("user_id", "string", False),
        ("event_type", "string", False),
        ("session", "integer", False),
    ]

    shown = subprocess.run(
        ["microingest", "schema", env.pipeline.name],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MICROINGEST_PIPELINES_DIR": str(env.pipelines_dir)},
    )
    assert shown.returncode == 0, shown.stderr
    assert f"# the fields of subject {subject} version 2 (schema id" in shown.stdout
    assert (
        "schema:\n  event_id: {type: string, required: true}\n  amount: {type: double, required: true}\n"
        in shown.stdout
        and "  user_id: string\n" in shown.stdout
    )

    path = env.pipelines_dir / f"{env.pipeline.name}.yaml"
    path.write_text(path.read_text().replace(subject, "no-such-subject"))
    try:
        load_pipeline_file(path)
    except Exception as exc:
        assert (
            "field 'schema.from_registry': subject no-such-subject version latest: the registry does not hold"
            in str(exc)
        )
    else:
        raise AssertionError("a subject the registry does not hold must fail the declaration")
