"""Dead letters redriven exactly once: a declaration too strict makes dead letters, it is fixed, and the redrive lands
them by the sink's rules, each once, whatever repeats (a second redrive, a retry after kill -9 in the commit). Run as
the DAG's ingest task runs it (the plan, then its job), and through Airflow as `microingest redrive` does."""

import json
import os
import re
import subprocess

import pytest

from helpers.pipeline_env import DEMO_SCHEMA, UPSERT_TARGET, job_result, reached_pause
from microingest.batches import WITHHELD_MARK, RedriveSelection, RunInfo
from microingest.plan.backfill import plan_backfill
from microingest.plan.redrive import plan_redrive, redrive_summary
from microingest.plan.redrive_preview import preview_redrive
from microingest.plan.request import RedriveRequest, SkipRequest, parse_request
from microingest.plan.skip import plan_skip

# The declaration of the incident: user_id wrongly required, and a business rule refusing what it should not.
TOO_STRICT = {
    "schema": {**DEMO_SCHEMA, "user_id": {"type": "string", "required": True}},
    "transform": "microingest.transforms:require_positive_amount",
    "dead_letter": {"max_fraction": 1},
}
FIXED = {"schema": DEMO_SCHEMA, "transform": None}

# (key, value) in offset order on one partition, and the error class the strict declaration gives each
RECORDS = [
    (b"c", {"event_id": "e0", "user_id": "u0", "event_type": "click", "amount": 5}, None),
    (b"a", {"event_id": "e1", "event_type": "click", "amount": 2}, "missing_field"),
    (b"b", {"event_id": "e2", "user_id": "u2", "event_type": "click", "amount": -3}, "transform_failed"),
    (b"d", b'{"event_id": "trunc', "invalid_json"),
    (b"a", {"event_id": "e4", "user_id": "u4", "event_type": "click", "amount": 7}, None),
    (b"e", {"event_id": "e5", "event_type": "view", "amount": 11}, "missing_field"),
]
DEAD = [o for o, (*_, cls) in enumerate(RECORDS) if cls]
STAYS_DEAD = [3]


def encoded(value):
    return value if isinstance(value, bytes) else json.dumps(value).encode()


def incident(env, **declared):
    """The strict declaration's live run over RECORDS, then the fixed declaration."""
    env.redeclare(**{**TOO_STRICT, **declared.get("strict", {})})
    env.send_to(0, [(key, encoded(value)) for key, value, _ in RECORDS])
    env.ingest_all()
    assert [(o, cls) for _, o, cls, *_ in env.dead_letters()] == [(o, RECORDS[o][2]) for o in DEAD]
    env.redeclare(**{**FIXED, **declared.get("fixed", {})})


def redrive(env, request=None, **job):
    plan, _ = plan_redrive(env.pipeline, request or RedriveRequest(), "on-call")
    result = env.spark_job(plan, **job)
    return plan, result


def dead_state(env):
    """(offset, error_class, resolved by a batch, redrives) of every dead letter, resolved ones kept."""
    return env.query(
        'SELECT "offset", error_class, resolved_by::text, redrives FROM microingest.dead_letters WHERE pipeline = %s '
        "ORDER BY 1",
        (env.pipeline.name,),
    )


def redrive_batches(env):
    return env.query(
        "SELECT batch_id::text, records_read, rows_written, dead_letters, note FROM microingest.batches WHERE "
        "pipeline = %s AND kind = 'redrive' ORDER BY committed_at",
        (env.pipeline.name,),
    )


@pytest.mark.quick
def test_append_redrive_lands_each_fixed_dead_letter_once_and_a_second_changes_nothing(env):
    incident(env)
    preview = preview_redrive(env.pipeline, plan_redrive(env.pipeline, RedriveRequest(), "on-call")[0])
    assert (preview.decoded, preview.landing, dict(preview.failing)) == (4, 3, {"invalid_json": 1})
    assert env.batch_count() == 1, "a dry run writes nothing"

    _, result = redrive(env)
    assert result.returncode == 0, result.stdout[-3000:]
    assert '"records_read": 4, "rows_written": 3, "dead_letters": 1' in result.stdout
    assert [(o, e) for _, o, e in env.landed_once()] == [(0, "e0"), (1, "e1"), (2, "e2"), (4, "e4"), (5, "e5")]
    [(batch_id, read, written, dead, note)] = redrive_batches(env)
    assert (read, written, dead) == (4, 3, 1) and note.startswith("redriven by on-call") and "3 resolved" in note
    assert dead_state(env) == [
        (1, "missing_field", batch_id, 1),
        (2, "transform_failed", batch_id, 1),
        (3, "invalid_json", None, 1),
        (5, "missing_field", batch_id, 1),
    ]
    assert env.ledger() == {0: 6}, "a redrive leaves the live position alone"

    before = env.target_rows()
    again, result = redrive(env)
    assert result.returncode == 0, result.stdout[-3000:]
    assert [(r.partition, r.from_offset, r.until_offset) for r in again.ranges] == [(0, 3, 4)]
    assert env.target_rows() == before
    assert [row[1:4] for row in redrive_batches(env)] == [(4, 3, 1), (1, 0, 1)]
    assert [(o, resolved) for o, _, resolved, _ in dead_state(env)] == [
        (1, batch_id),
        (2, batch_id),
        (3, None),
        (5, batch_id),
    ]


def test_upsert_redrive_never_lets_an_older_record_overwrite_a_newer_row(env):
    env.replace_target(UPSERT_TARGET)
    incident(env, strict={"sink_mode": "upsert_latest"}, fixed={"sink_mode": "upsert_latest"})
    assert env.query(f"SELECT record_key, source_offset FROM {env.pipeline.target_table} ORDER BY 1") == [
        ("a", 4),
        ("c", 0),
    ]
    _, result = redrive(env)
    assert result.returncode == 0, result.stdout[-3000:]
    # a's dead letter at offset 1 is older than its row from offset 4: resolved, but the row stays offset 4's
    rows = env.query(f"SELECT record_key, source_offset, event_id, amount FROM {env.pipeline.target_table} ORDER BY 1")
    assert rows == [("a", 4, "e4", 7), ("b", 2, "e2", -3), ("c", 0, "e0", 5), ("e", 5, "e5", 11)]
    assert [(o, resolved is not None) for o, _, resolved, _ in dead_state(env)] == [
        (1, True),
        (2, True),
        (3, False),
        (5, True),
    ]
    _, result = redrive(env)
    assert (
        result.returncode == 0
        and env.query(f"SELECT record_key, source_offset, event_id, amount FROM {env.pipeline.target_table} ORDER BY 1")
        == rows
    )


AGGREGATE = {
    "sink_mode": "aggregate",
    "aggregate": {"group_by": ["event_type"], "measures": {"events": "count", "amount_total": {"sum": "amount"}}},
}


def aggregate_env(env):
    env.replace_target("event_type text PRIMARY KEY, events bigint NOT NULL, amount_total bigint NOT NULL")
    typed = {"event_type": {"type": "string", "required": True}, "amount": "integer"}
    incident(
        env,
        strict={**AGGREGATE, "schema": {**TOO_STRICT["schema"], **typed}},
        fixed={**AGGREGATE, "schema": {**DEMO_SCHEMA, **typed}},
    )
    assert totals(env) == {"click": (2, 12)}


def totals(env):
    return {
        t: (e, a) for t, e, a in env.query(f"SELECT event_type, events, amount_total FROM {env.pipeline.target_table}")
    }


# Every record but the invalid JSON, each counted once.
AGGREGATED = {"click": (4, 11), "view": (1, 11)}


def test_aggregate_redrive_counts_each_dead_letter_once(env):
    aggregate_env(env)
    _, result = redrive(env, RedriveRequest(RedriveSelection(error_class="missing_field")))
    assert result.returncode == 0, result.stdout[-3000:]
    assert totals(env) == {"click": (3, 14), "view": (1, 11)}
    for _ in range(2):  # the rest, then nothing new
        _, result = redrive(env)
        assert result.returncode == 0, result.stdout[-3000:]
        assert totals(env) == AGGREGATED
    assert [row[1:4] for row in redrive_batches(env)] == [(2, 2, 0), (2, 1, 1), (1, 0, 1)]


@pytest.mark.parametrize("fault", ["before_commit", "after_commit"])
def test_a_redrive_killed_at_its_commit_is_retried_and_counts_once(env, fault):
    """kill -9 inside the redrive's commit (nothing of it committed) or right after it (committed, the job never said
    so): the retry of the same DAG run, on the plan its first try was given, counts each dead letter once."""
    aggregate_env(env)
    plan, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    run = RunInfo("microingest_test", f"redrive_{fault}")
    killed = env.spark_job(plan, fault=fault, run=run)
    assert killed.returncode != 0
    assert totals(env) == ({"click": (2, 12)} if fault == "before_commit" else AGGREGATED)
    retried = env.spark_job(plan, run=run)
    assert retried.returncode == 0, retried.stdout[-3000:]
    assert totals(env) == AGGREGATED
    assert len(redrive_batches(env)) == 1
    assert '"records_read": 4, "rows_written": 2, "dead_letters": 1' in retried.stdout


def test_a_redrive_racing_another_resolves_each_dead_letter_once(env, tmp_path):
    """Two redrives decode the same dead letters; the first commits while the second waits to commit its own: under
    the pipeline's lock the second finds them resolved and counts none of them again."""
    aggregate_env(env)
    marker = tmp_path / "paused"
    plan, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    paused = env.spark_job(plan, fault=f"after_decode:pause:{marker}", wait=False)
    assert reached_pause(paused, marker)
    _, first = redrive(env)
    marker.unlink()
    second = job_result(paused)
    assert first.returncode == 0 and second.returncode == 0, first.stdout[-2000:] + second.stdout[-2000:]
    assert totals(env) == AGGREGATED
    assert [row[1:4] for row in redrive_batches(env)] == [(4, 2, 1), (4, 0, 1)]
    assert '"skipped": 3' in second.stdout


def test_skipped_records_are_redriven_through_airflow(api, served):
    """The on-call flow: records skipped during an incident are redriven by `microingest redrive`, as a DAG run of
    the pipeline with the Redrive Params, its outcome printed and its note written."""
    env = served["redrive"]
    sent = env.send_to(2, [(b"k", json.dumps({"event_id": f"s{i}", "amount": i}).encode()) for i in range(5)])
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(2, 5, "incident 42"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    assert env.target_rows() == []

    cli = ["microingest", "redrive", env.pipeline.name, "--error-class", "skipped", "--partition", "2"]
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, timeout=120, env=os.environ)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "redrive of 5 dead letter(s)" in dry.stdout and "5 would land, 0 still fail" in dry.stdout

    result = subprocess.run(cli, capture_output=True, text=True, timeout=900, env=os.environ)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "committed 1 batch(es): 5 records read, 5 rows written, 0 dead letters" in result.stdout
    assert sorted((p, o) for p, o, _ in env.landed_once()) == sorted(sent)
    run_id = re.search(r"triggered \S+ run (\S+);", result.stdout).group(1)
    run = api.dag_run(env.pipeline.dag_id, run_id)
    assert run.tasks == {"ingest": "success", "announce": "success"}
    assert api.note(env.pipeline.dag_id, run_id).startswith("redrive: 1 batch, 5 dead letters decoded again")
    doctor = subprocess.run(
        ["microingest", "doctor", env.pipeline.name], capture_output=True, text=True, env=os.environ
    )
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "ok   every batch of the 1 finished run(s) looked at was announced" in doctor.stdout
    assert "ok   no unresolved dead letters" in doctor.stdout


def test_a_skipped_record_still_failing_stays_skipped_so_a_backfill_still_counts_it_once(env):
    """A redrive that cannot land a skipped record keeps it `skipped` (today's reason in its message): the skip
    batch counted nothing, so a backfill over the skip, once the cause is fixed, resolves it and an aggregate
    counts it once, and a redrive after that finds nothing to add."""
    env.replace_target("event_type text PRIMARY KEY, events bigint NOT NULL")
    aggregate = {"group_by": ["event_type"], "measures": {"events": "count"}}
    strict = {
        "event_id": "string",
        "event_type": {"type": "string", "required": True},
        "user_id": {"type": "string", "required": True},
    }
    env.redeclare(sink_mode="aggregate", aggregate=aggregate, schema=strict)
    env.send_to(0, [(b"k", json.dumps({"event_id": f"e{i}", "event_type": "click"}).encode()) for i in range(3)])
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, 3, "incident"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    _, result = redrive(env)
    assert result.returncode == 0 and '"dead_letters": 3' in result.stdout, result.stdout[-3000:]
    assert {(cls, msg.split(":")[0]) for _, _, cls, msg, *_ in env.dead_letters()} == {
        ("skipped", "still failing after a redrive")
    }
    assert env.query(f"SELECT event_type FROM {env.pipeline.target_table}") == []

    env.redeclare(schema={**strict, "user_id": "string"})
    backfilled = env.spark_job(plan_backfill(env.pipeline, parse_request({"backfill_ranges": {"0": [0, 3]}})))
    assert backfilled.returncode == 0, backfilled.stdout[-3000:]
    assert env.query(f"SELECT event_type, events FROM {env.pipeline.target_table}") == [("click", 3)]
    _, again = redrive(env)
    assert again.returncode == 0 and env.query(f"SELECT event_type, events FROM {env.pipeline.target_table}") == [
        ("click", 3)
    ]


def test_a_cleared_redrive_run_tries_its_failing_dead_letters_again_and_a_retry_does_not(env):
    """A retry of a redrive run goes on after what it committed; a cleared run (Airflow's clear_number) starts over,
    so the dead letters still failing are decoded again with the declaration fixed in between."""
    incident(env)
    env.redeclare(**TOO_STRICT)  # nothing fixed yet: all four still fail
    plan, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    first = env.spark_job(plan, run=RunInfo("microingest_test", "redrive_run", 1, 0))
    assert first.returncode == 0 and '"rows_written": 0, "dead_letters": 4' in first.stdout, first.stdout[-3000:]
    env.redeclare(**FIXED)
    retried = env.spark_job(plan, run=RunInfo("microingest_test", "redrive_run", 2, 0))
    assert retried.returncode == 0 and len(redrive_batches(env)) == 1, retried.stdout[-3000:]
    cleared = env.spark_job(plan, run=RunInfo("microingest_test", "redrive_run", 1, 1))
    assert cleared.returncode == 0 and '"rows_written": 3, "dead_letters": 1' in cleared.stdout, cleared.stdout[-3000:]
    assert [(o, resolved is not None) for o, _, resolved, _ in dead_state(env)] == [
        (1, True),
        (2, True),
        (3, False),
        (5, True),
    ]


def test_a_redrive_whose_declaration_gained_a_mask_since_its_plan_is_refused_and_writes_nothing(env):
    """The plan was made under a declaration without a mask; the job finds one (a retry, a cleared task re-running
    an old plan): it judges by the declaration it decodes with, so no clear-text value lands beside masked ones."""
    incident(env)
    plan, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    assert plan.ranges, "the plan, made before the mask, takes the dead letters"
    before = (env.target_rows(), dead_state(env))
    env.redeclare(mask={"user_id": "sha256"})

    result = env.spark_job(plan)

    assert result.returncode != 0
    assert "RedriveRefusedError" in result.stdout and "redrives do not run yet" in result.stdout, result.stdout[-3000:]
    assert (env.target_rows(), dead_state(env)) == before
    assert redrive_batches(env) == []


def test_withheld_dead_letters_of_a_mask_since_removed_are_never_redriven(env):
    """A masked pipeline keeps no record in its dead letters (nor in a skip's); with the mask taken off, a redrive
    would decode their missing values as tombstones. They stay as they are, and the plan says why."""
    env.redeclare(**TOO_STRICT, mask={"user_id": "sha256"})
    env.send_to(0, [(key, encoded(value)) for key, value, _ in RECORDS])
    env.ingest_all()
    env.send_to(0, [(b"s", encoded({"event_id": "s0", "user_id": "u", "event_type": "click", "amount": 1}))])
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, 7, "incident 9"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]
    letters = env.dead_letters()
    assert [(o, cls, key, value) for _, o, cls, _, key, value, _ in letters] == [
        *((o, RECORDS[o][2], None, None) for o in DEAD),
        (6, "skipped", None, None),
    ]
    assert all(msg.startswith(WITHHELD_MARK) for *_, msg, _, _, _ in letters)
    assert letters[-1][3] == f"{WITHHELD_MARK}skipped by on-call: incident 9"
    env.redeclare(**FIXED, mask=None)

    plan, groups = plan_redrive(env.pipeline, RedriveRequest(), "on-call")

    assert plan.ranges == ()
    summary = redrive_summary(plan, groups)
    assert "no unresolved dead letter is selected" in summary and "5 withheld dead letter(s) left" in summary
    result = env.spark_job(plan)
    assert result.returncode == 0, result.stdout[-3000:]
    assert env.dead_letters() == letters and redrive_batches(env) == []
    assert [o for _, o, _ in env.landed_once()] == [0, 4]


def test_a_redrive_of_large_dead_letters_goes_in_pages_bounded_by_bytes(env, monkeypatch):
    """value_too_large dead letters of 200 kB each, redriven once the limit is raised, in pages bounded by
    MICROINGEST_REDRIVE_PAGE_BYTES as well as by records (1 MB here: four letters, and the fifth that passes it);
    the dry run reads them the same way. Each lands once."""
    env.redeclare(max_value_bytes=1000, dead_letter={"max_fraction": 1})
    big = [(f"k{i}".encode(), encoded({"event_id": f"e{i}", "event_type": "x" * 200_000})) for i in range(24)]
    sent = env.send_to(0, big)
    env.ingest_all()
    assert [cls for _, _, cls, *_ in env.dead_letters()] == ["value_too_large"] * 24
    env.redeclare(max_value_bytes=1_048_576)
    monkeypatch.setenv("MICROINGEST_REDRIVE_PAGE_BYTES", "1000000")

    plan, _ = plan_redrive(env.pipeline, RedriveRequest(), "on-call")
    preview = preview_redrive(env.pipeline, plan)
    assert (preview.decoded, preview.landing, preview.more) == (24, 24, False)
    result = env.spark_job(plan)

    assert result.returncode == 0, result.stdout[-3000:]
    assert [row[1:4] for row in redrive_batches(env)] == [(5, 5, 0)] * 4 + [(4, 4, 0)]
    assert [(p, o) for p, o, _ in env.landed_once()] == sorted(sent)
    assert all(resolved is not None for _, _, resolved, _ in dead_state(env))
