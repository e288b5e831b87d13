-- Staging: Spark executors write a batch's rows here in parallel, each in its own transaction; the driver then
-- moves them into the target in the one transaction that also advances the ledger. A batch attempt is listed in
-- staging_batches while it runs and holds a session advisory lock on its id, so an attempt whose driver died is
-- recognisable (its lock is free) and its rows are removed by the next attempt.
CREATE SCHEMA IF NOT EXISTS microingest_staging;

CREATE TABLE IF NOT EXISTS microingest.staging_batches (
    batch_id    uuid        PRIMARY KEY,
    pipeline    text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    owner       text
);
