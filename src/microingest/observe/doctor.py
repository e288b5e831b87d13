"""`microingest doctor`: one pipeline's ledger, batch history, consumer group mirror, Asset events and Kafka offsets
read and compared (`doctor_rules` says what disagrees and what to do). Reads only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from microingest.declare.pipeline import Pipeline
from microingest.errors import MicroingestError
from microingest.lag import observations as lag_history
from microingest.lag.mirror import group_id
from microingest.lag.sources import pipeline_sources
from microingest.observe.announcements import announced_batch_ids
from microingest.observe.doctor_rules import (
    BAD,
    WARN,
    Finding,
    announcement_findings,
    dead_letter_findings,
    gone_findings,
    history_findings,
    kafka_findings,
    mirror_findings,
)
from microingest.systems.airflow_api import AirflowClient
from microingest.systems.kafka_access import group_offsets
from microingest.systems.pipeline_systems import PipelineSystems

ANNOUNCED_KINDS = ("ingest", "backfill", "redrive")  # the batches an Asset event names
RUNS_LOOKED_AT = timedelta(days=1)


def examine(pipeline: Pipeline, airflow: AirflowClient | None) -> list[Finding]:
    """Everything that disagrees about `pipeline` (and what agrees); `airflow` None: Asset events left out."""
    systems = PipelineSystems.of(pipeline)
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT l.topic, l.partition, l.next_offset, l.batch_id::text, b.kind, (SELECT max((e->>'until')::bigint) "
            "FROM jsonb_array_elements(b.ranges) e WHERE (e->>'partition')::int = l.partition AND e->>'topic' = "
            "l.topic) FROM microingest.ledger l LEFT JOIN microingest.batches b ON b.batch_id = l.batch_id "
            "WHERE l.pipeline = %s ORDER BY 1, 2",
            (pipeline.name,),
        )
        ledger_rows = [row for row in cur.fetchall() if pipeline.reads_topic(row[0])]
        cur.execute(
            "SELECT error_class, count(*) FROM microingest.dead_letters WHERE pipeline = %s AND resolved_by IS NULL "
            "GROUP BY 1",
            (pipeline.name,),
        )
        unresolved = dict(cur.fetchall())
        planning = lag_history.planning_error(conn, pipeline.name)
    found = [Finding(BAD, f"its latest planning failed: {planning}", "see the ingest task's log")] if planning else []
    try:
        sources = pipeline_sources(pipeline, systems)
        group = group_id(pipeline.name)
        for topic in sources.topics:
            ledger, earliest, latest = sources.positions[topic]
            found += kafka_findings(topic, ledger, earliest, latest)
            pinned = [p for t, p, _, _, kind, _ in ledger_rows if kind == "pin" and t == topic]
            found += mirror_findings(group, topic, ledger, group_offsets(systems.kafka_client, group, topic), pinned)
        found += gone_findings(sources.gone)
    except MicroingestError as exc:
        found.append(Finding(BAD, f"Kafka could not be read: {exc}", "check the broker and the Kafka connection"))
    found += history_findings(ledger_rows)
    found += dead_letter_findings(unresolved)
    if airflow is not None:
        found += _announcements(pipeline, systems, airflow)
    return found


def _announcements(pipeline: Pipeline, systems: PipelineSystems, airflow: AirflowClient) -> list[Finding]:
    since = datetime.now(timezone.utc) - RUNS_LOOKED_AT
    with systems.db() as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT dag_id, run_id, array_agg(batch_id::text) FROM microingest.batches WHERE pipeline = %s AND "
            "kind = ANY(%s) AND dag_id IS NOT NULL AND committed_at >= %s GROUP BY 1, 2",
            (pipeline.name, list(ANNOUNCED_KINDS), since),
        )
        committed = {(d, r): set(ids) for d, r, ids in cur.fetchall()}
    runs = {}
    try:
        for (dag_id, run_id), ids in committed.items():
            if not airflow.dag_run(dag_id, run_id).finished:
                continue  # its announce task has not run yet
            events = airflow.asset_events(dag_id, run_id)
            runs[(dag_id, run_id)] = (ids, announced_batch_ids(e.get("extra") for e in events))
    except MicroingestError as exc:
        return [Finding(WARN, f"Asset events not compared: Airflow's API could not be read ({exc})")]
    return announcement_findings(runs)
