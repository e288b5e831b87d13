"""Plan: offset ranges from the ledger, Kafka and a run's Params (live runs, backfills, skips); pure range arithmetic
in offsets."""
