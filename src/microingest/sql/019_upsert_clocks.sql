-- upsert_latest orders a key's records by their clock: the latest Kafka timestamp among the key's records in its
-- topic partition up to each one (a partition's CreateTime may go backwards when several producers write it), then
-- topic, partition and offset. A total order, so a key's final row is the same however batches were cut.
-- A row's clock is its kafka_timestamp unless listed here; a remembered tombstone keeps its own.
CREATE TABLE IF NOT EXISTS microingest.upsert_clocks (
    pipeline    text        NOT NULL,
    record_key  text        NOT NULL,
    clock       timestamptz NOT NULL,
    PRIMARY KEY (pipeline, record_key)
);
ALTER TABLE microingest.upsert_tombstones ADD COLUMN IF NOT EXISTS clock timestamptz;
