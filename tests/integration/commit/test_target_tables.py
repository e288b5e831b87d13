"""Target tables owned by their declarations, against the real Postgres, Kafka and Spark: `microingest migrate`
creates a missing target, adds a newly declared field's column with an audit row, refuses a change the table cannot
take, and a job checks the table before it reads anything."""

import os
import subprocess

import pytest
from psycopg2 import sql

from helpers.pipeline_env import DEMO_SCHEMA
from microingest.batches import RunInfo
from microingest.commit.target_tables import TargetError, check_target
from microingest.plan.backfill import plan_backfill
from microingest.plan.request import parse_request
from microingest.systems.kafka_access import json_bytes
from microingest.systems.postgres import connection


def migrate(env) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["microingest", "migrate"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MICROINGEST_PIPELINES_DIR": str(env.pipelines_dir)},
    )


def job_check(env) -> None:
    with connection(env.pg) as conn, conn.cursor() as cur:
        check_target(cur, env.pipeline)


def columns(env) -> list[tuple]:
    return env.query(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema "
        "= 'public' AND table_name = %s ORDER BY ordinal_position",
        (env.pipeline.name,),
    )


def changes(env) -> list[tuple]:
    return env.query(
        "SELECT change, column_name, column_type, declared_schema ? 'discount', declaration, changed_by "
        "FROM microingest.schema_changes WHERE pipeline = %s ORDER BY id",
        (env.pipeline.name,),
    )


def send_events(env, ids: range) -> list[tuple[int, int]]:
    """Producers that already write a discount, whether the declaration reads it or not."""
    return env.send(
        [(f"e{i}".encode(), json_bytes({"event_id": f"e{i}", "amount": float(i), "discount": i / 100})) for i in ids]
    )


def test_migrate_creates_the_target_then_adds_a_declared_field_and_a_backfill_fills_it(env):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    with pytest.raises(TargetError, match="does not exist; `microingest migrate` creates it"):
        job_check(env)

    created = migrate(env)
    assert created.returncode == 0, created.stderr
    assert f"pipeline {env.pipeline.name}: target public.{env.pipeline.name} created with 11 columns" in created.stdout
    assert columns(env) == [
        ("source_topic", "text", "NO"),
        ("source_partition", "integer", "NO"),
        ("source_offset", "bigint", "NO"),
        ("kafka_timestamp", "timestamp with time zone", "YES"),
        ("batch_id", "uuid", "NO"),
        ("event_id", "text", "NO"),
        ("user_id", "text", "YES"),
        ("event_type", "text", "YES"),
        ("amount", "double precision", "YES"),
        ("event_time", "timestamp with time zone", "YES"),
        ("ingested_at", "timestamp with time zone", "NO"),
    ]
    assert env.query(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass AND contype = 'p'",
        (env.pipeline.target_table,),
    ) == [("PRIMARY KEY (source_topic, source_partition, source_offset)",)]
    declaration = str(env.pipelines_dir / f"{env.pipeline.name}.yaml")
    assert {c[0] for c in changes(env)} == {"created"} and len(changes(env)) == 11
    assert changes(env)[5] == ("created", "event_id", "text NOT NULL", False, declaration, "microingest migrate")

    before = send_events(env, range(0, 60))
    env.ingest_all()
    again = migrate(env)
    assert "matches the declaration" in again.stdout and len(changes(env)) == 11, "idempotent, nothing audited"

    env.redeclare(schema={**DEMO_SCHEMA, "discount": "double"})
    with pytest.raises(TargetError, match=r"lacks the columns of declared field\(s\) discount; `microingest migrate`"):
        job_check(env)
    added = migrate(env)
    assert added.returncode == 0, added.stderr
    assert "added discount double precision" in added.stdout
    assert changes(env)[-1] == ("added", "discount", "double precision", True, declaration, "microingest migrate")
    assert ("discount", "double precision", "YES") in columns(env)
    discounts = sql.SQL("SELECT event_id, discount FROM {} ORDER BY source_partition, source_offset").format(env.table)
    assert {d for _, d in env.query(discounts)} == {None}, "rows already there keep NULL"

    after = send_events(env, range(60, 90))
    env.ingest_all()
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(before + after)
    assert {e: d for e, d in env.query(discounts) if d is not None} == {f"e{i}": i / 100 for i in range(60, 90)}

    # A backfill over the records that landed before the column existed, replacing them, fills it.
    ranges = {}
    for p, o in before:
        lo, hi = ranges.get(str(p), (o, o + 1))
        ranges[str(p)] = [min(lo, o), max(hi, o + 1)]
    plan = plan_backfill(env.pipeline, parse_request({"backfill_ranges": ranges, "overlap": "replace"}, "manual"))
    result = env.spark_job(plan, run=RunInfo(dag_id="microingest_test", run_id="manual__fill_discount"))
    assert result.returncode == 0, result.stdout[-3000:]
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(before + after)
    assert dict(env.query(discounts)) == {f"e{i}": i / 100 for i in range(90)}


def test_a_change_the_table_cannot_take_is_refused_and_nothing_is_altered(env):
    shape = columns(env)
    # amount's column holds doubles, not the integers now declared; event_id is NOT NULL and no longer declared.
    schema = {**{k: v for k, v in DEMO_SCHEMA.items() if k != "event_id"}, "amount": "integer", "discount": "double"}
    env.redeclare(schema=schema)
    refused = migrate(env)
    assert refused.returncode == 2
    error = refused.stderr
    assert f"target table public.{env.pipeline.name} does not fit pipeline {env.pipeline.name}'s declaration" in error
    assert "amount: found double precision, wanted bigint: double precision cannot hold every bigint value" in error
    assert f"ALTER TABLE public.{env.pipeline.name} ALTER COLUMN amount TYPE bigint" in error
    assert "event_id: found text NOT NULL, wanted no column (the declaration does not write it)" in error
    assert "put field event_id back in the schema" in error
    assert columns(env) == shape and changes(env) == [], "not even the addable discount column"
    with pytest.raises(TargetError, match="amount: found double precision, wanted bigint"):
        job_check(env)

    env.redeclare(schema=DEMO_SCHEMA, sink_mode="upsert_latest")  # a key changed: position to record key
    refused = migrate(env)
    assert refused.returncode == 2
    assert "record_key: missing, wanted text NOT NULL: the upsert_latest sink's key is made of it" in refused.stderr
    assert (
        "(key): found unique keys (source_offset, source_partition, source_topic), wanted a unique key on "
        "(record_key)" in refused.stderr
    )
    assert columns(env) == shape and changes(env) == []


def test_a_decimal_declared_wider_is_widened_in_place_and_audited_and_a_narrower_one_refused(env):
    env.query_commit(sql.SQL("DROP TABLE {}").format(env.table))
    env.redeclare(schema={**DEMO_SCHEMA, "total": {"type": "decimal", "precision": 12, "scale": 2}})
    assert migrate(env).returncode == 0
    env.send([(b"k", json_bytes({"event_id": "e1", "total": 9999999999.99}))])
    env.ingest_all()

    env.redeclare(schema={**DEMO_SCHEMA, "total": {"type": "decimal", "precision": 14, "scale": 3}})
    with pytest.raises(
        TargetError, match=r"narrower decimal columns than declared: total \(declared numeric\(14,3\)\)"
    ):
        job_check(env)
    result = migrate(env)
    assert result.returncode == 0 and "widened total to numeric(14,3)" in result.stdout, result.stdout + result.stderr
    job_check(env)
    assert env.query(sql.SQL("SELECT total::text FROM {}").format(env.table)) == [("9999999999.990",)]
    assert env.query(
        "SELECT column_type, declared_schema->'total' FROM microingest.schema_changes WHERE pipeline = %s "
        "AND change = 'widened'",
        (env.pipeline.name,),
    ) == [("numeric(14,3)", {"type": "decimal", "required": False, "precision": 14, "scale": 3})]

    env.redeclare(schema={**DEMO_SCHEMA, "total": {"type": "decimal", "precision": 12, "scale": 2}})
    result = migrate(env)
    assert result.returncode != 0 and "microingest does not narrow a decimal column" in result.stdout + result.stderr
    assert env.query(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'total'",
        (env.pipeline.target_table,),
    ) == [("numeric(14,3)",)]
