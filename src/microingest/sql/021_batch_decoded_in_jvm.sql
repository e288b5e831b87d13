-- How many of each batch's records the JVM's strict decoder read (the rest went to the reference decoder in Python
-- workers): where a batch's time went, and what `make bench` reports per contender. NULL for batches committed
-- before this was recorded, and for an operator's batches (skips, pins), which decode nothing.
ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS decoded_in_jvm bigint;
