-- Target of the demo pipeline (pipelines/demo_events.yaml). The primary key on the source position means a
-- record can land once at most even if every other safeguard failed.
CREATE TABLE IF NOT EXISTS public.demo_events (
    source_topic      text             NOT NULL,
    source_partition  integer          NOT NULL,
    source_offset     bigint           NOT NULL,
    kafka_timestamp   timestamptz,
    batch_id          uuid             NOT NULL,
    event_id          text             NOT NULL,
    user_id           text,
    event_type        text,
    amount            double precision,
    event_time        timestamptz,
    ingested_at       timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (source_topic, source_partition, source_offset)
);
