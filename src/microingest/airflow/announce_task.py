"""The body of a pipeline DAG's `announce` task, a teardown of `ingest`: it runs once ingest is done whether ingest
succeeded, failed or was skipped, and the run's state stays ingest's.

It announces the batches the run committed and no earlier event of the run named (one Asset event on the target,
its extra from microingest.observe.announcements), and writes the run's note. Announcing after ingest is done, not
per batch, means a run that commits three batches and then fails still announces the three once its retries are
spent, and a retried or cleared run announces only what is new: the events the run emitted before are read back
from Airflow, which registers an event together with its task's success.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from airflow.sdk import Asset
from airflow.sdk.exceptions import AirflowSkipException

from microingest.airflow import GATE_TASK_ID, PLAN_SUMMARY_KEY
from microingest.commit.history import batches_of_run, restarts_of_run
from microingest.declare.pipeline import Pipeline
from microingest.errors import MicroingestError
from microingest.observe.announcements import announced_batch_ids, announcement, unannounced
from microingest.observe.run_notes import run_note
from microingest.systems.airflow_api import AirflowClient
from microingest.systems.connections import get_connection
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)

NOTES_CONN_ID = "microingest_airflow"  # Airflow's REST API, as a user who may edit DAG runs (notes)
NOTE_MAX_LEN = 1000  # Airflow's limit


def announce(pipeline: Pipeline, asset: Asset, context: dict[str, Any]) -> None:
    ti, dag_run = context["ti"], context["dag_run"]
    with PipelineSystems.of(pipeline).db() as conn:
        batches = batches_of_run(conn, pipeline.name, ti.dag_id, ti.run_id)
        restarts = restarts_of_run(conn, pipeline.name, ti.dag_id, ti.run_id)
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[GATE_TASK_ID, "ingest"], run_ids=[ti.run_id]).get(
        ti.run_id, {}
    )
    outcome = ti.xcom_pull(task_ids="ingest") or {}
    started = dag_run.start_date or datetime.now(timezone.utc)
    note = run_note(
        batches,
        (datetime.now(timezone.utc) - started).total_seconds(),
        ingest_state=states.get("ingest"),
        plan_summary=ti.xcom_pull(task_ids="ingest", key=PLAN_SUMMARY_KEY),
        gate_state=states.get(GATE_TASK_ID),
        dry_run=bool(context["params"].get("dry_run")),
        remaining=outcome.get("remaining") or 0,
        restarts=restarts,
    )
    log.info("run note: %s", note)
    write_note(ti.dag_id, ti.run_id, note)

    since = dag_run.run_after or started  # every event of this run came after the run was due
    earlier = [
        e.extra
        for e in context["inlet_events"][asset].after(since.isoformat())
        if e.source_dag_id == ti.dag_id and e.source_run_id == ti.run_id
    ]
    new = unannounced(batches, announced_batch_ids(earlier))
    if not new:
        raise AirflowSkipException(
            f"nothing to announce: this run's {len(batches)} batch(es) are announced "
            "already, or a skip's (which leaves the target alone)"
            if batches
            else "nothing to announce: this run committed no batch"
        )
    extra = announcement(pipeline.name, ti.dag_id, ti.run_id, new)
    context["outlet_events"][asset].extra = extra
    log.info(
        "announcing %d batch(es) on %s: %s records, %s rows, %s dead letters, ranges %s",
        len(new),
        asset.uri,
        extra["records_read"],
        extra["rows_written"],
        extra["dead_letters"],
        extra["ranges"],
    )


def write_note(dag_id: str, run_id: str, note: str) -> None:
    """Through Airflow's REST API (a task cannot set its run's note otherwise); a run's note is for people, so
    trouble here is a warning, never a failed announcement."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        client = AirflowClient.of_connection(get_connection(NOTES_CONN_ID))
        client.set_note(dag_id, run_id, note[:NOTE_MAX_LEN])
    except AirflowNotFoundException:
        log.warning("no run note: define connection %s (Airflow's API, a user who may edit DAG runs)", NOTES_CONN_ID)
    except MicroingestError as exc:
        log.warning("the run note could not be written: %s", exc)
