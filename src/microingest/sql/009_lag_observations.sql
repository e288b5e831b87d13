-- Lag history: what each planning (and each lag sensor poke) saw per partition, so lag states can be judged over a
-- window and the lag page can draw lag over time. position is the ledger's next offset (NULL: not started),
-- log_end the last stable offset Kafka reported. Kept for 7 days.
CREATE TABLE IF NOT EXISTS microingest.lag_observations (
    pipeline     text        NOT NULL,
    partition    integer     NOT NULL,
    observed_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    position     bigint,
    log_end      bigint      NOT NULL,
    source       text        NOT NULL  -- plan | gate | sla
);
CREATE INDEX IF NOT EXISTS lag_observations_pipeline_time_idx ON microingest.lag_observations (pipeline, observed_at);

-- The latest planning outcome per pipeline: error is set while planning fails (Kafka or Postgres unreachable, a
-- retention gap the pipeline may not skip, ...) and cleared by the next planning that succeeds.
CREATE TABLE IF NOT EXISTS microingest.planning_health (
    pipeline    text        PRIMARY KEY,
    checked_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    error       text
);
