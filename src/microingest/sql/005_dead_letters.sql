-- Dead letters: records that can never be ingested as they are (undecodable, schema-violating, failing the
-- transform, ...). Written in the same transaction as their batch, so a record is either in the target or here,
-- exactly once; the unique key on the source position enforces the "once".
CREATE TABLE IF NOT EXISTS microingest.dead_letters (
    id               bigserial   PRIMARY KEY,
    pipeline         text        NOT NULL,
    batch_id         uuid        NOT NULL,
    topic            text        NOT NULL,
    partition        integer     NOT NULL,
    "offset"         bigint      NOT NULL,
    kafka_timestamp  timestamptz,
    record_key       bytea,
    record_value     bytea,
    headers          jsonb,
    error_class      text        NOT NULL,
    error_message    text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (pipeline, topic, partition, "offset")
);

CREATE INDEX IF NOT EXISTS dead_letters_pipeline_created_idx ON microingest.dead_letters (pipeline, created_at);

-- Executors stage dead letters here beside the batch's rows; the commit moves them into dead_letters.
CREATE UNLOGGED TABLE IF NOT EXISTS microingest_staging.dead_letters (
    batch_id         uuid        NOT NULL,
    topic            text        NOT NULL,
    partition        integer     NOT NULL,
    "offset"         bigint      NOT NULL,
    kafka_timestamp  timestamptz,
    record_key       bytea,
    record_value     bytea,
    headers          jsonb,
    error_class      text        NOT NULL,
    error_message    text        NOT NULL,
    UNIQUE (batch_id, topic, partition, "offset")
);

ALTER TABLE microingest.batches ADD COLUMN IF NOT EXISTS dead_letters bigint NOT NULL DEFAULT 0;
