-- Runs commit several batches (a backlog drained in one DAG run, a backfill in capped batches): each history row
-- says which batch of its run it was, and a retried run finds what it already committed by its run id.
-- kind is now ingest | backfill (replayed below the live position, the ledger untouched) | pin.
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS run_batch integer;
CREATE INDEX IF NOT EXISTS batches_pipeline_run_idx ON microingest.batches (pipeline, dag_id, run_id);
