-- The Kafka id of the topic each live position belongs to. A topic deleted and created again under its name gets a
-- new id and starts its offsets over: the plan compares the ids and refuses (or, with on_topic_recreated: restart,
-- starts the new topic from start_from) instead of reading on from the old topic's positions. NULL: not yet known
-- (rows from before this migration), taken at the next commit.
ALTER TABLE microingest.ledger ADD COLUMN IF NOT EXISTS topic_id uuid;
