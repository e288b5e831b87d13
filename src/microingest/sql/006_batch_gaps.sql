-- Retention gaps a batch skipped (pipelines with on_retention_gap: skip): [{topic, partition, from, until}].
-- Recorded in the batch's own transaction together with the time and run, so data loss is audited, never silent.
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS gaps jsonb;
