"""microingest: exactly-once batch ingestion of Kafka offset ranges into Postgres, orchestrated by Airflow.

Module map (one concern each):
  declarations  pipeline YAML -> Pipeline            planning   ledger + Kafka offsets -> offset ranges
  kafka_access  kafka-python + Spark Kafka options   ledger     Postgres ledger, staging and the commit protocol
  sinks         how staged rows become target rows   codec      record bytes -> typed row
  spark_batch   the Spark job body                   lag        per-partition consumer lag
  connections   Airflow connections -> client config airflow/   DAG factory and operators (imports Airflow)
"""

__version__ = "0.1.0"
