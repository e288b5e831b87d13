"""Trigger a pipeline's DAG through Airflow's REST API, follow the run, and report what it did.

What `microingest backfill` does for terminal users: the run is an ordinary manual DAG run (visible in the UI, with
its logs and history rows), so nothing here bypasses Airflow.
"""

from __future__ import annotations

from collections.abc import Callable

from microingest.airflow import PLAN_SUMMARY_KEY
from microingest.declare.pipeline import Pipeline
from microingest.systems.airflow_api import AirflowClient, DagRun


def run_and_report(
    client: AirflowClient,
    pipeline: Pipeline,
    conf: dict,
    say: Callable[[str], None],
    note: str | None = None,
    timeout: float = 3600,
) -> DagRun:
    client.wait_for_dag(pipeline.dag_id, say=say)
    run_id = client.trigger(pipeline.dag_id, conf, note=note)
    say(f"triggered {pipeline.dag_id} run {run_id}; following it (Ctrl-C stops following, not the run)")
    run = client.wait_for_run(pipeline.dag_id, run_id, timeout=timeout, on_change=lambda r: say(f"  {r.describe()}"))
    for line in outcome_lines(client, run):
        say(line)
    return run


def outcome_lines(client: AirflowClient, run: DagRun) -> list[str]:
    lines = [f"run {run.run_id}: {run.state}"]
    summary = client.xcom(run, "ingest", PLAN_SUMMARY_KEY)
    if summary:
        lines.append(summary)
    outcome = client.xcom(run, "ingest") if run.tasks.get("ingest") == "success" else None
    if outcome:
        lines.append(
            f"committed {outcome['batches']} batch(es): {outcome['records_read']:,} records read, "
            f"{outcome['rows_written']:,} rows written, {outcome['dead_letters']:,} dead letters, "
            f"{outcome.get('skipped', 0):,} skipped as already there"
        )
        if outcome.get("remaining"):
            lines.append(f"time budget spent: {outcome['remaining']:,} records left; trigger again to go on")
    elif run.tasks.get("ingest") == "skipped":
        lines.append("nothing written: ingest was skipped (dry run, or nothing to read)")
    for task_id, state in sorted(run.tasks.items()):
        if state == "failed":
            lines.append(f"task {task_id} failed:")
            lines += [f"  {e}" for e in error_events(client, run, task_id)] or ["  (no error in its log)"]
    return lines


def error_events(client: AirflowClient, run: DagRun, task_id: str, limit: int = 5) -> list[str]:
    events = [e for e in client.log_events(run, task_id) if e.get("level") in ("error", "critical")]
    return [_one_line(e) for e in events[-limit:]]


def _one_line(event: dict) -> str:
    text = str(event.get("event", ""))
    detail = event.get("error_detail")
    if isinstance(detail, list) and detail and isinstance(detail[-1], dict):
        exc = detail[-1]
        text = f"{text}: {exc.get('exc_type', '')}: {exc.get('exc_value', '')}".strip()
    return text
