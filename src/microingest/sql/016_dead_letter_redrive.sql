-- A redrive decodes dead letters again once their cause is fixed. One that now lands is kept, marked with the redrive
-- batch that resolved it (so a repeated redrive resolves nothing twice, and the story of its offset stays told); one
-- that still fails keeps its row with the new reason. redriven_by: the last redrive batch that tried it.
ALTER TABLE microingest.dead_letters ADD COLUMN IF NOT EXISTS resolved_by uuid;
ALTER TABLE microingest.dead_letters ADD COLUMN IF NOT EXISTS resolved_at timestamptz;
ALTER TABLE microingest.dead_letters ADD COLUMN IF NOT EXISTS redriven_by uuid;
ALTER TABLE microingest.dead_letters ADD COLUMN IF NOT EXISTS redrives integer NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS dead_letters_unresolved_idx ON microingest.dead_letters (pipeline, topic, partition, "offset")
    WHERE resolved_by IS NULL;
-- kind is now ingest | backfill | pin | skip | restart | redrive (dead letters decoded again, the ledger untouched).
