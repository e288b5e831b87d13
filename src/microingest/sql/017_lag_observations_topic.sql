-- Pipelines read several topics: each lag observation names its topic. Observations made before this migration
-- belong to the pipeline's one topic: the one its ledger moved last (a topic renamed in the declaration leaves the
-- old name's rows behind); those of a pipeline with no ledger row yet are left out. Apply it with the platform's
-- services stopped (`make up` and `microingest migrate` do): a plan of the code before it writes no topic.
ALTER TABLE microingest.lag_observations ADD COLUMN IF NOT EXISTS topic text;
UPDATE microingest.lag_observations o SET topic = l.topic
FROM (SELECT DISTINCT ON (pipeline) pipeline, topic FROM microingest.ledger ORDER BY pipeline, updated_at DESC) l
WHERE o.topic IS NULL AND o.pipeline = l.pipeline;
DELETE FROM microingest.lag_observations WHERE topic IS NULL;
ALTER TABLE microingest.lag_observations ALTER COLUMN topic SET NOT NULL;
