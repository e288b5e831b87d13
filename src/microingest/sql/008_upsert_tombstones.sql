-- upsert_latest targets: the version (source position and Kafka timestamp) of each key whose row a tombstone deleted.
-- A replayed or late older record of that key is compared with it and dropped, instead of bringing the key back.
-- Only keys currently absent from the target are listed: a newer value of the key removes its entry.
CREATE TABLE IF NOT EXISTS microingest.upsert_tombstones (
    pipeline          text        NOT NULL,
    record_key        text        NOT NULL,
    source_topic      text        NOT NULL,
    source_partition  integer     NOT NULL,
    source_offset     bigint      NOT NULL,
    kafka_timestamp   timestamptz,
    batch_id          uuid        NOT NULL,
    PRIMARY KEY (pipeline, record_key)
);
