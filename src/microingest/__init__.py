"""microingest: exactly-once batch ingestion of Kafka offset ranges into Postgres, orchestrated by Airflow.

One package per stage of the data's way, declare -> plan -> read/decode -> commit -> observe:
  declare/   pipeline YAML -> Pipeline             plan/      ledger + Kafka + Params -> offset ranges, batches
  decode/    Kafka records -> rows / dead letters, every value storable
  spark/     a run on Spark: the run loop, one batch, the executors' decoder, spark-submit and Spark Connect
  commit/    the read's proof, the one transaction per batch (one COPY per record), ledger, history, the skip
  lag/       consumer lag figures and rules        airflow/   everything that imports Airflow
  systems/   connections resolved once, Postgres, Kafka, migrations
  cli/       the command line, the demo, the REST client                bench/  `make bench`
Beside them: errors (the one error family: refused or transient), transforms (the ready-made transforms a
declaration names as microingest.transforms:<function>), settings (environment knobs), faults (test fault points).
"""

__version__ = "0.1.0"
