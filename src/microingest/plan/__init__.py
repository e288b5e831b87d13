"""Plan: offset ranges from the ledger, Kafka and a run's Params; pure range arithmetic in offsets."""
