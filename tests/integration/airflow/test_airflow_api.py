"""The operators' workflows through the running Airflow (api-server, scheduler, dag-processor, triggerer started by
`make test`): REST API v2 with token auth, Params validation, backfills by time and by offsets (the latter through
`microingest backfill`), and Airflow's own backfill over two data intervals run in parallel.

The pipelines come from the `served` fixture (conftest): declared in the folder the running Airflow serves.
"""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone

import pytest

from microingest.cli.remote_run import error_events
from microingest.plan.live import plan_live_run
from microingest.systems.airflow_api import AirflowApiError
from microingest.systems.kafka_access import partition_bounds


def finished(api, env, run_id):
    return api.wait_for_run(env.pipeline.dag_id, run_id, timeout=600)


@pytest.mark.quick
def test_a_run_triggered_with_params_reads_what_they_ask(api, served):
    env = served["live"]
    produced = env.produce(600)
    run = finished(api, env, api.trigger(env.pipeline.dag_id, {"max_records": 250}, note="capped run"))
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})

    ledger = env.ledger()
    assert sum(ledger.values()) == 250
    assert env.landed_once() == sorted(r for r in produced if r[1] < ledger[r[0]])
    outcome = api.xcom(run, "ingest")
    assert (outcome["records_read"], outcome["rows_written"]) == (250, 250)
    assert "250 records" in api.xcom(run, "ingest", "plan_summary")
    [(_, kind, read, written, dag_id, run_id)] = env.batches()
    assert (kind, read, written, dag_id, run_id) == ("ingest", 250, 250, env.pipeline.dag_id, run.run_id)


def test_wrongly_typed_params_are_refused_by_the_api_and_semantic_errors_fail_plan(api, served):
    env = served["bad_params"]
    dag_id = env.pipeline.dag_id
    for conf, where in (
        ({"max_records": "lots"}, "max_records"),
        ({"overlap": "merge"}, "overlap"),
        ({"backfill_ranges": {"zero": [0, 10]}}, "backfill_ranges"),
        ({"backfill_ranges": {"0": [10]}}, "backfill_ranges"),
        ({"backfill_from_time": "yesterday"}, "backfill_from_time"),
    ):
        with pytest.raises(AirflowApiError) as refused:
            api.trigger(dag_id, conf)
        assert refused.value.status == 400 and where in str(refused.value), conf
    assert api.get(f"/api/v2/dags/{dag_id}/dagRuns")["total_entries"] == 0

    env.produce(30)
    requests = [
        ({"backfill_ranges": {"7": [0, 10]}}, "backfill_ranges['7']"),
        ({"backfill_ranges": {"0": [5, 2]}}, "backfill_ranges['0']"),
        (
            {"backfill_from_time": "2026-01-02T00:00:00Z", "backfill_until_time": "2026-01-01T00:00:00Z"},
            "backfill_until_time",
        ),
    ]
    run_ids = [api.trigger(dag_id, conf) for conf, _ in requests]
    for (conf, message), run_id in zip(requests, run_ids):
        run = finished(api, env, run_id)
        assert (run.state, run.tasks) == (
            "failed",
            {"ingest": "failed", "announce": "skipped"},
        ), conf
        errors = " ".join(error_events(api, run, "ingest"))
        assert message in errors, (conf, errors[-2000:])
        assert run.tries["ingest"] == 1  # refused for good: the same request would fail the same way
    assert (env.target_rows(), env.batches(), env.ledger()) == ([], [], {})


def test_backfills_by_time_through_the_api_and_by_offsets_through_the_cli(api, served, kafka):
    env = served["history"]
    base = int((datetime.now(timezone.utc) - timedelta(hours=1)).timestamp()) * 1000
    produced = env.produce(180, timestamp_of=lambda i: base + i * 1000)  # one record per second of event time
    plan_live_run(env.pipeline)  # started at `latest`: everything produced so far is history
    _, ends = partition_bounds(kafka, env.topic)
    assert env.ledger() == ends

    start = datetime.fromtimestamp((base + 60_000) / 1000, timezone.utc)
    window = {
        "backfill_from_time": start.isoformat(),
        "backfill_until_time": (start + timedelta(minutes=1)).isoformat(),
    }
    run = finished(api, env, api.trigger(env.pipeline.dag_id, window))
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})
    assert env.landed_once() == sorted(produced[60:120])
    [event] = api.asset_events(env.pipeline.dag_id, run.run_id)
    assert (event["extra"]["kind"], event["extra"]["rows_written"]) == ("backfill", 60)
    assert api.note(env.pipeline.dag_id, run.run_id).startswith("backfill: 1 batch, 60 records, 60 rows")

    cli = ["microingest", "backfill", env.pipeline.name, "--overlap", "skip_existing"]
    for p in sorted(ends):
        cli += ["--partition", str(p), "--from", "0", "--until", str(ends[p])]
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, timeout=600)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "180 records" in dry.stdout and "dry run" in dry.stdout and "nothing written" in dry.stdout
    assert env.landed_once() == sorted(produced[60:120])

    result = subprocess.run(cli, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "committed 1 batch(es): 180 records read, 120 rows written, 0 dead letters, 60 skipped" in result.stdout
    assert env.landed_once() == sorted(produced)
    assert env.ledger() == ends  # backfills never move the live position
    history = [b for b in env.batches() if b[1] != "pin"]
    assert [(kind, written) for _, kind, _, written, _, _ in history] == [("backfill", 60), ("backfill", 120)]
    assert {dag_id for *_, dag_id, _ in history} == {env.pipeline.dag_id}


def test_the_cli_reports_a_refused_backfill_and_exits_non_zero(served):
    env = served["history"]
    result = subprocess.run(
        ["microingest", "backfill", env.pipeline.name, "--partition", "9", "--from", "0", "--until", "5"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "task ingest failed" in result.stdout and "backfill_ranges['9']" in result.stdout
    usage = subprocess.run(
        ["microingest", "backfill", env.pipeline.name, "--partition", "0", "--from", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert usage.returncode == 2 and "one --from and one --until for each --partition" in usage.stderr


def test_airflow_native_backfill_replays_two_data_intervals_in_parallel(api, served, kafka):
    env = served["native"]
    hour = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    ms = int(hour.timestamp() * 1000)
    # 40 records ten minutes into each of three consecutive hours; the backfill covers the first two hours.
    produced = env.produce(120, timestamp_of=lambda i: ms + (i // 40) * 3_600_000 + 600_000 + i * 1000)
    plan_live_run(env.pipeline)  # started at `latest`: the live position is the end, all of the above is history
    api.unpause(env.pipeline.dag_id)  # its scheduled live runs find nothing new above that position

    backfill = api.post(
        "/api/v2/backfills",
        {
            "dag_id": env.pipeline.dag_id,
            "from_date": hour.isoformat(),
            "to_date": (hour + timedelta(minutes=90)).isoformat(),
            "max_active_runs": 2,
            "dag_run_conf": {"overlap": "refuse"},
        },
    )
    runs = api.get(f"/api/v2/dags/{env.pipeline.dag_id}/dagRuns", run_type="backfill")["dag_runs"]
    assert sorted(r["logical_date"][:19] for r in runs) == [
        hour.strftime("%Y-%m-%dT%H:%M:%S"),
        (hour + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S"),
    ]
    done = [finished(api, env, r["dag_run_id"]) for r in runs]
    assert [(r.state, r.tasks["ingest"]) for r in done] == [("success", "success")] * 2, backfill

    assert env.landed_once() == sorted(produced[:80])
    history = env.query(
        "SELECT run_id, records_read FROM microingest.batches WHERE pipeline = %s AND kind = "
        "'backfill' ORDER BY run_id",
        (env.pipeline.name,),
    )
    assert sorted(run_id for run_id, _ in history) == sorted(r.run_id for r in done)
    assert [n for _, n in history] == [40, 40]
    started = [
        datetime.fromisoformat(api.get(f"/api/v2/dags/{env.pipeline.dag_id}/dagRuns/{r.run_id}")["start_date"])
        for r in done
    ]
    ended = [
        datetime.fromisoformat(api.get(f"/api/v2/dags/{env.pipeline.dag_id}/dagRuns/{r.run_id}")["end_date"])
        for r in done
    ]
    assert max(started) < min(ended), "the two backfill runs did not overlap in time"
