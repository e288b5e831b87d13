-- One row per committed batch, written in the batch's own transaction: what was read, what landed, who ran it.
CREATE TABLE IF NOT EXISTS microingest.batches (
    batch_id      uuid        PRIMARY KEY,
    pipeline      text        NOT NULL,
    kind          text        NOT NULL,            -- ingest | pin (position recorded for a partition, nothing read)
    ranges        jsonb       NOT NULL,            -- [{topic, partition, from, until, ledger}]
    records_read  bigint      NOT NULL DEFAULT 0,
    rows_written  bigint      NOT NULL DEFAULT 0,
    started_at    timestamptz NOT NULL,
    staged_at     timestamptz,
    committed_at  timestamptz NOT NULL DEFAULT now(),
    dag_id        text,
    run_id        text,
    task_try      integer,
    spark_app_id  text
);

CREATE INDEX IF NOT EXISTS batches_pipeline_committed_idx ON microingest.batches (pipeline, committed_at);
