-- Why a batch happened when an operator made it: a skip records who moved the live position and for what reason.
-- kind is now ingest | backfill | pin | skip (records moved past by an operator, kept as dead letters).
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS note text;
