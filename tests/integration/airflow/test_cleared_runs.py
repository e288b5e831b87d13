"""A finished backfill run cleared in Airflow replays its plan under its overlap policy: it reads again and says so,
or fails at once saying why; it never succeeds having done nothing."""

from psycopg2 import sql

from helpers.pipeline_env import Env


def clear_run(api, dag_id: str, run_id: str) -> None:
    """What the UI's "Clear" on a whole DAG run does: every task of it again."""
    api.post(
        f"/api/v2/dags/{dag_id}/clearTaskInstances",
        {"dag_run_id": run_id, "only_failed": False, "dry_run": False, "reset_dag_runs": True},
    )


def backfill_batches(env: Env, run_id: str) -> list[tuple]:
    return env.query(
        "SELECT records_read, rows_written, clear_number FROM microingest.batches WHERE pipeline = %s "
        "AND run_id = %s AND kind = 'backfill' ORDER BY committed_at",
        (env.pipeline.name, run_id),
    )


def test_a_cleared_backfill_run_replays_its_plan_or_fails_saying_why(api, served):
    env = served["replay"]
    dag_id = env.pipeline.dag_id
    produced = env.produce(100)
    assert api.wait_for_run(dag_id, api.trigger(dag_id, {}), timeout=600).state == "success"
    p = max({p for p, _, _ in produced}, key=lambda q: sum(1 for r in produced if r[0] == q))
    until = sum(1 for r in produced if r[0] == p)

    replace = api.trigger(dag_id, {"backfill_ranges": {str(p): [0, until]}, "overlap": "replace"})
    assert api.wait_for_run(dag_id, replace, timeout=600).state == "success"
    first = backfill_batches(env, replace)
    assert sum(read for read, _, _ in first) == until

    # A damaged window: the replay must read again and write those rows back.
    env.query_commit(sql.SQL("DELETE FROM {} WHERE source_partition = %s").format(env.table), (p,))
    clear_run(api, dag_id, replace)
    run = api.wait_for_run(dag_id, replace, timeout=600)
    assert run.state == "success" and run.tries["ingest"] == 2
    replayed = backfill_batches(env, replace)[len(first) :]
    assert sum(read for read, _, _ in replayed) == until and {c for _, _, c in replayed} == {1}
    assert api.xcom(run, "ingest")["records_read"] == until  # what this clearing read, not the sum of both
    env.assert_exactly_once(produced)

    # Under overlap refuse, a replay of positions now in the target is refused at once, saying what to do instead.
    env.query_commit(sql.SQL("DELETE FROM {} WHERE source_partition = %s").format(env.table), (p,))
    refuse = api.trigger(dag_id, {"backfill_ranges": {str(p): [0, until]}})
    assert api.wait_for_run(dag_id, refuse, timeout=600).state == "success"
    clear_run(api, dag_id, refuse)
    run = api.wait_for_run(dag_id, refuse, timeout=600)
    assert (run.state, run.tasks["ingest"]) == ("failed", "failed")
    assert len(backfill_batches(env, refuse)) == 1
    said = " ".join(str(e.get("error_detail")) for e in api.log_events(run, "ingest") if e.get("level") == "error")
    assert "overlaps records already in" in said and "choose 'replace'" in said
    env.assert_exactly_once(produced)
