-- A batch is written once now: the executors decode it, the driver COPYs it into the target inside the commit
-- transaction (merges stage in temporary tables of that transaction). The shared staging tables and the attempt
-- registry are no longer used.
DROP SCHEMA IF EXISTS microingest_staging CASCADE;
DROP TABLE IF EXISTS microingest.staging_batches;
