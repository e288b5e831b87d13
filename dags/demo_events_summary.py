"""An example downstream of the demo pipeline: scheduled on its target's Asset, it summarises exactly the rows each
event announces, per batch and event type, into public.demo_events_summary. Defined while pipeline demo_events is
declared.

What a consumer of any microingest target can do: an event's extra names the batches that landed (`batch_ids`) and
the source positions they hold (`ranges`: topic, partition, [from, until) offsets), so it reads those rows and
nothing older, and a re-run of the same event changes nothing.
"""

from __future__ import annotations

import json

from airflow.sdk import DAG, task

from microingest.airflow.assets import asset_of

SUMMARY = """
CREATE TABLE IF NOT EXISTS public.demo_events_summary (
    batch_id       uuid             NOT NULL,
    event_type     text             NOT NULL,
    events         bigint           NOT NULL,
    amount         double precision,
    summarized_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (batch_id, event_type)
);
INSERT INTO public.demo_events_summary (batch_id, event_type, events, amount)
SELECT e.batch_id, coalesce(e.event_type, '(none)'), count(*), sum(e.amount)
FROM public.demo_events e
JOIN jsonb_to_recordset(%(ranges)s::jsonb) AS r(topic text, "partition" int, "from" bigint, until bigint)
  ON e.source_topic = r.topic AND e.source_partition = r."partition"
 AND e.source_offset >= r."from" AND e.source_offset < r.until
GROUP BY 1, 2
ON CONFLICT (batch_id, event_type) DO NOTHING
"""

try:
    DEMO_EVENTS = asset_of("demo_events")
except LookupError:  # the demo pipeline is not declared here: no summary of it either
    DEMO_EVENTS = None

if DEMO_EVENTS is not None:
    with DAG(
        dag_id="demo_events_summary",
        schedule=[DEMO_EVENTS],
        catchup=False,
        max_active_runs=1,
        tags=["microingest", "example"],
        doc_md=__doc__,
    ):

        @task(inlets=[DEMO_EVENTS])
        def summarize(triggering_asset_events=None) -> dict:
            # When the task runs: the dag-processor parses this file every 30 s and needs none of these.
            from microingest.systems.connections import get_connection, postgres_params
            from microingest.systems.postgres import connection

            events = triggering_asset_events[DEMO_EVENTS]
            ranges = [r for event in events for r in (event.extra or {}).get("ranges", [])]
            with (
                connection(postgres_params(get_connection("microingest_postgres"))) as conn,
                conn,
                conn.cursor() as cur,
            ):
                cur.execute(SUMMARY, {"ranges": json.dumps(ranges)})
                summarized = cur.rowcount
            batches = [b for event in events for b in (event.extra or {}).get("batch_ids", [])]
            print(f"{len(events)} event(s), batches {batches}: {summarized} summary row(s) added")
            return {"batch_ids": batches, "summary_rows": summarized}

        summarize()
