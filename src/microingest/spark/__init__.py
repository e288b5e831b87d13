"""The Spark job: a run's batches on executors, spark-submit, Spark Connect, the worker daemon."""
