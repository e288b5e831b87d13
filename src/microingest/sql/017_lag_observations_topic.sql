-- Pipelines read several topics: each lag observation names its topic. Observations made before this migration
-- belong to the pipeline's one topic (the ledger's); those of a pipeline with no ledger row yet are left out.
ALTER TABLE microingest.lag_observations ADD COLUMN IF NOT EXISTS topic text;
UPDATE microingest.lag_observations o SET topic = l.topic
FROM (SELECT pipeline, min(topic) AS topic FROM microingest.ledger GROUP BY pipeline) l
WHERE o.topic IS NULL AND o.pipeline = l.pipeline;
DELETE FROM microingest.lag_observations WHERE topic IS NULL;
ALTER TABLE microingest.lag_observations ALTER COLUMN topic SET NOT NULL;
