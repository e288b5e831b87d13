-- Which clearing of its DAG run made a batch (Airflow's dag_run.clear_number, 0 before any): a retry of a backfill
-- goes on from the batches of its own clearing; a run cleared to replay its backfill starts over.
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS clear_number integer NOT NULL DEFAULT 0;
