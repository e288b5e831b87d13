"""microingest: exactly-once batch ingestion of Kafka offset ranges into Postgres, orchestrated by Airflow.

One package per stage of the data's way, declare -> plan -> read/decode -> commit -> observe:
  declare/   pipeline YAML -> Pipeline             plan/      ledger + Kafka + Params -> offset ranges
  decode/    Kafka records -> staged rows / dead letters, every value storable
  commit/    staging, the one transaction per batch, ledger, history, the skip
  lag/       consumer lag figures and rules        spark/     the Spark job, spark-submit, Spark Connect
  systems/   connections, Postgres, Kafka, migrations
  airflow/   everything that imports Airflow       cli/       the command line, the demo, the REST client
"""

__version__ = "0.1.0"
