"""`make bench`: this platform side by side with what users would otherwise write, on the same Kafka data.

- dataset:      the records (deterministic JSON events), produced once per run, and their decoded rows
- targets:      one identically shaped Postgres table per contender
- memory:       peak memory of a contender's processes and of Postgres, sampled while it runs
- contenders:   how each contender is run and timed; `kafka_loop` and `streaming` are the alternatives themselves
- limits:       what bounds everyone: Postgres COPY of the decoded rows, and a Spark count of the Kafka ranges
- runner:       one bench run, contender by contender; report and chart write what it measured
"""
