"""The escape hatch: a skip moves a stuck partition past records no retry gets through, with every skipped record kept
as a dead letter with the operator's reason, and the skip in the history and in `lag`. It runs on Spark as a batch of
its own kind (here as the operator runs it, or through Airflow as `microingest skip` does)."""

import json
import os
import re
import subprocess

import pytest
from kafka import KafkaAdminClient, TopicPartition
from psycopg2 import sql

from helpers.pipeline_env import UPSERT_TARGET, RawHeaderName
from microingest.batches import RunInfo
from microingest.errors import REFUSED_EXIT
from microingest.plan.backfill import plan_backfill
from microingest.plan.live import plan_live_run, plan_next_batch
from microingest.plan.request import SkipRequest, parse_request
from microingest.plan.skip import plan_skip


def cli(*args, timeout=120):
    return subprocess.run(["microingest", *args], capture_output=True, text=True, timeout=timeout, env=os.environ)


def event(i):
    return json.dumps({"event_id": f"ev-{i}"}).encode()


def skip(env, partition, until, reason, who="on-call"):
    """The skip as the DAG's ingest task runs it: planned, then its Spark job."""
    result = env.spark_job(plan_skip(env.pipeline, SkipRequest(partition, until, reason), who))
    assert result.returncode == 0, result.stdout[-3000:]
    return result


def test_a_partition_refused_on_every_retry_is_skipped_with_nothing_lost(env):
    env.redeclare(dead_letter={"max_records": 0})  # a guard that refuses any batch holding a bad record
    records = (
        [(b"k", event(i)) for i in range(10)]
        + [(b"k", b"broken producer", [("h", b"\x00")])] * 3
        + [(b"k", event(i)) for i in range(10, 20)]
    )
    sent = env.send_to(0, records)
    refused = env.spark_job(list(plan_next_batch(env.pipeline).ranges))
    assert refused.returncode == REFUSED_EXIT and "exceed dead_letter.max_records 0" in refused.stdout
    env.redeclare(max_records_per_batch=10)
    again = env.spark_job(plan_live_run(env.pipeline))  # the ten good records, then refused again at offset 10
    assert again.returncode == REFUSED_EXIT and env.ledger() == {0: 10}

    bad = cli("skip", env.pipeline.name, "--partition", "0", "--until", "9", "--reason", "x")
    assert bad.returncode == 2 and "until 9 is not beyond the live position 10" in bad.stderr
    result = skip(env, 0, 13, "producer v2.3 wrote plain text, fixed in v2.4")
    assert '"records_read": 3, "rows_written": 0, "dead_letters": 3' in result.stdout

    assert env.ledger() == {0: 13}
    dead = env.dead_letters()
    assert [(p, o, cls, msg, bytes(k), bytes(v), h) for p, o, cls, msg, k, v, h in dead] == [
        (
            0,
            o,
            "skipped",
            "skipped by on-call: producer v2.3 wrote plain text, fixed in v2.4",
            b"k",
            b"broken producer",
            [{"key": "h", "value_base64": "AA=="}],
        )
        for o in (10, 11, 12)
    ]
    [(kind, read, written, note)] = env.query(
        "SELECT kind, records_read, rows_written, note FROM microingest.batches WHERE pipeline = %s AND kind = 'skip'",
        (env.pipeline.name,),
    )
    assert (kind, read, written) == ("skip", 3, 0) and "on-call" in note
    lag = cli("lag", env.pipeline.name).stdout
    assert " skip " in lag and "skipped by on-call: producer v2.3" in lag

    env.ingest_all()
    landed = {(p, o) for p, o, _ in env.target_rows()}
    assert landed | {(p, o) for p, o, *_ in dead} == set(sent) and len(landed) + len(dead) == len(sent)


@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
def test_a_skip_killed_at_its_commit_is_retried_and_done_once(env, fault):
    """kill -9 inside the skip's commit (nothing of it committed) or right after it (committed, but the job never
    said so): the retry of the same DAG run keeps each record once and moves the position once."""
    env.send_to(0, [(b"k", event(i)) for i in range(6)])
    plan, run = plan_skip(env.pipeline, SkipRequest(0, 4, "test"), "on-call"), RunInfo("microingest_test", "skip_run")
    killed = env.spark_job(plan, fault=fault, run=run)
    assert killed.returncode != 0
    assert env.ledger() == ({} if fault == "before_commit" else {0: 4})
    retried = env.spark_job(plan, run=run)  # a retry plays the plan its run's first try was given
    assert retried.returncode == 0, retried.stdout[-3000:]
    assert [(o, cls) for _, o, cls, *_ in env.dead_letters()] == [(o, "skipped") for o in range(4)]
    assert env.ledger() == {0: 4} and [kind for _, kind, *_ in env.batches()] == ["skip"]
    env.ingest_all()
    assert [o for _, o, _ in env.target_rows()] == [4, 5]


def test_a_live_batch_planned_before_a_skip_is_fenced(env):
    env.send_to(0, [(b"k", event(i)) for i in range(5)])
    env.ingest_all()
    env.send_to(0, [(b"k", event(i)) for i in range(5, 9)])
    planned = list(plan_next_batch(env.pipeline).ranges)
    skip(env, 0, 7, "test")

    late = env.spark_job(planned)
    assert late.returncode == REFUSED_EXIT and "fenced" in late.stdout
    env.ingest_all()
    assert sorted(o for p, o, _ in env.target_rows() if p == 0) == [0, 1, 2, 3, 4, 7, 8]


def test_microingest_skip_runs_through_airflow_and_says_what_it_kept(api, served):
    env = served["skip"]
    sent = env.send_to(1, [(b"k", b"not json")] * 4 + [(b"k", event(i)) for i in range(6)])
    dag_id = env.pipeline.dag_id
    refused = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert refused.state == "failed" and 1 not in env.ledger()

    result = cli(
        "skip",
        env.pipeline.name,
        "--partition",
        "1",
        "--until",
        "4",
        "--reason",
        "producer sent text; fixed",
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"skip of {env.topic}[1] [0, 4) (4 offsets)" in result.stdout
    assert "committed 1 batch(es): 4 records read, 0 rows written, 4 dead letters" in result.stdout
    run_id = re.search(r"triggered \S+ run (\S+);", result.stdout).group(1)
    run = api.dag_run(dag_id, run_id)
    assert run.tasks == {"ingest": "success", "announce": "skipped"}  # the target is untouched
    assert api.note(dag_id, run_id).startswith("skip: 1 batch, 4 records, 0 rows, 4 dead letters")
    [(note,)] = env.query(
        "SELECT note FROM microingest.batches WHERE pipeline = %s AND kind = 'skip'", (env.pipeline.name,)
    )
    assert note == "skipped by admin: producer sent text; fixed"  # the Airflow user who triggered the run

    run = api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600)
    assert run.state == "success"
    landed = {(p, o) for p, o, _ in env.target_rows()}
    dead = {(p, o) for p, o, cls, *_ in env.dead_letters() if cls == "skipped"}
    assert landed | dead == set(sent) and not landed & dead


def test_a_skip_past_offsets_retention_deleted_keeps_what_kafka_holds_and_records_the_gap(env):
    """A partition stuck longer than the topic's retention: its live position lies below the earliest offset. The
    skip keeps every record Kafka still holds and records the deleted offsets as a gap, never a short read."""
    env.send_to(0, [(b"k", event(i)) for i in range(5)])
    env.ingest_all()
    env.send_to(0, [(b"k", event(i)) for i in range(5, 15)])
    admin = KafkaAdminClient(**env.kafka)
    admin.delete_records({TopicPartition(env.topic, 0): 8})
    admin.close()

    dry = cli("skip", env.pipeline.name, "--partition", "0", "--until", "12", "--reason", "stuck", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert f"skip of {env.topic}[0] [8, 12) (4 offsets)" in dry.stdout and "dry run: nothing written" in dry.stdout
    assert "offsets [5, 8) were already deleted by retention" in dry.stdout
    assert env.ledger() == {0: 5} and env.dead_letters() == []
    skip(env, 0, 12, "stuck")

    assert [o for _, o, *_ in env.dead_letters()] == [8, 9, 10, 11] and env.ledger() == {0: 12}
    [(gaps,)] = env.query(
        "SELECT gaps FROM microingest.batches WHERE pipeline = %s AND kind = 'skip'", (env.pipeline.name,)
    )
    assert gaps == [{"topic": env.topic, "partition": 0, "from": 5, "until": 8}]


AGGREGATE_TARGET = (
    "user_id text NOT NULL, events bigint NOT NULL, amount_total double precision NOT NULL, PRIMARY KEY (user_id)"
)


@pytest.mark.parametrize(
    "sink_mode,overlap", [("append", "refuse"), ("upsert_latest", "skip_existing"), ("aggregate", "replace")]
)
def test_a_backfill_over_skipped_positions_resolves_their_dead_letters(env, sink_mode, overlap):
    """An operator skips records a transform refused, fixes the transform and backfills them: each skipped position
    ends as exactly one target row (counted once by an aggregate) or one dead letter of today's reason, whatever the
    sink and the overlap policy; the skip stays in the history."""
    if sink_mode == "upsert_latest":
        env.replace_target(UPSERT_TARGET)
    elif sink_mode == "aggregate":
        env.replace_target(AGGREGATE_TARGET)
    aggregate = {"group_by": ["user_id"], "measures": {"events": "count", "amount_total": {"sum": "amount"}}}
    env.redeclare(
        sink_mode=sink_mode,
        max_records_per_batch=5,
        dead_letter={"max_records": 0},
        transform="microingest.transforms:require_positive_amount",
        schema={
            "event_id": {"type": "string", "required": True},
            "user_id": {"type": "string", "required": True},
            "amount": "double",
        },
        **({"aggregate": aggregate} if sink_mode == "aggregate" else {}),
    )

    def record(i, amount):
        return (f"k{i}".encode(), json.dumps({"event_id": f"ev-{i}", "user_id": "u", "amount": amount}).encode())

    # Offsets 5 and 6 fail the transform only; 7 and 8 are no JSON at all, whatever the transform.
    records = (
        [record(i, 1.0) for i in range(5)]
        + [record(5, -1.0), record(6, -2.0)]
        + [(b"k7", b"not json"), (b"k8", b"{")]
        + [record(i, 1.0) for i in range(9, 14)]
    )
    env.send_to(0, records)
    refused = env.spark_job(plan_live_run(env.pipeline))
    assert refused.returncode == REFUSED_EXIT and env.ledger() == {0: 5}
    skip(env, 0, 9, "bad amounts")
    env.ingest_all()
    assert env.ledger() == {0: 14}

    env.redeclare(transform=None, dead_letter={"max_fraction": 1.0})  # the transform fixed; two stay bad
    plan = plan_backfill(env.pipeline, parse_request({"backfill_ranges": {"0": [5, 9]}, "overlap": overlap}, "manual"))
    result = env.spark_job(plan, run=RunInfo("microingest_test", "manual__after_skip"))
    assert result.returncode == 0, result.stdout[-3000:]

    dead = {o: cls for _, o, cls, *_ in env.dead_letters()}
    assert set(dead) == {7, 8} and "skipped" not in dead.values()
    if sink_mode == "aggregate":
        [(events, total)] = env.query(sql.SQL("SELECT events, amount_total FROM {}").format(env.table))
        assert (events, total) == (12, 10 * 1.0 - 3.0)  # every record that decodes, counted once
    else:
        landed = [o for _, o, _ in env.landed_once()]
        assert sorted(landed) == [0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13]
    kinds = [kind for _, kind, *_ in env.batches()]
    assert "skip" in kinds and kinds[-1] == "backfill"
    [(note,)] = env.query(
        "SELECT note FROM microingest.batches WHERE pipeline = %s AND kind = 'backfill'", (env.pipeline.name,)
    )
    assert note == "resolved 4 skipped position(s)"


def test_a_skip_passes_a_header_name_kafka_python_cannot_read_and_keeps_it_as_ingest_does(env):
    """kafka-python refuses a header name that is not UTF-8; the skip reads with Spark's Kafka source, as every live
    batch does, so it passes the record and keeps the same dead letter a live batch would (the name as Kafka's Java
    client decodes it, the value whole)."""
    env.send_to(
        0, [(b"k", event(0)), (b"k", b"x", [(RawHeaderName(b"n\xffame"), b"\xff"), ("ok", b"v")]), (b"k", event(2))]
    )
    skip(env, 0, 3, "test")
    assert env.ledger() == {0: 3}
    dead = env.dead_letters()
    assert [(o, cls, bytes(v)) for _, o, cls, _, _, v, _ in dead] == [
        (0, "skipped", event(0)),
        (1, "skipped", b"x"),
        (2, "skipped", event(2)),
    ]
    assert dead[1][-1] == [{"key": "n\ufffdame", "value_base64": "/w=="}, {"key": "ok", "value": "v"}]
