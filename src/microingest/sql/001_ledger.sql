-- The ledger: for each pipeline and partition, the next offset to read. It is advanced only in the same
-- transaction that publishes the rows read below that offset, which is what makes ingestion exactly-once.
CREATE SCHEMA IF NOT EXISTS microingest;

CREATE TABLE IF NOT EXISTS microingest.ledger (
    pipeline     text        NOT NULL,
    topic        text        NOT NULL,
    partition    integer     NOT NULL CHECK (partition >= 0),
    next_offset  bigint      NOT NULL CHECK (next_offset >= 0),
    batch_id     uuid,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (pipeline, topic, partition)
);
