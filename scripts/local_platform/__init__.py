"""The local platform behind `make up/down/status`: Postgres, a Kafka KRaft broker and Airflow as processes on
loopback, everything they keep under the state folder ($MICROINGEST_STATE, default .state/)."""
