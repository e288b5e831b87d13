"""The systems the platform talks to: Airflow connections, Postgres, Kafka, the schema."""
