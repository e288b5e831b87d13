-- The records a pipeline's transform_sql filtered out of each batch: counted, never written, so a batch's records
-- are its rows, its dead letters and these.
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS filtered bigint NOT NULL DEFAULT 0;
