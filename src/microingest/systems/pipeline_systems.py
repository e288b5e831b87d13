"""A pipeline's Postgres and Kafka, resolved from their connections once and handed to whatever needs them.

Resolving a connection can be a round trip to Airflow's metastore, and a connection edited while a task runs would
otherwise give the two halves of one task two different servers: an entry point (a task, a job, a command) resolves
once, as a provider hook resolves its client once, and passes this on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ContextManager

from microingest.systems.connections import (ConnectionInfo, env_name, get_connection, kafka_python_config,
                                             postgres_params, spark_kafka_options, to_env_value)
from microingest.systems.postgres import connection


@dataclass(frozen=True)
class PipelineSystems:
    postgres_connection: ConnectionInfo
    kafka_connection: ConnectionInfo

    @classmethod
    def of(cls, pipeline) -> "PipelineSystems":
        return cls(get_connection(pipeline.postgres_conn_id), get_connection(pipeline.kafka_conn_id))

    @property
    def postgres(self) -> dict[str, Any]:
        """psycopg2.connect() keyword arguments."""
        return postgres_params(self.postgres_connection)

    def db(self) -> ContextManager[Any]:
        """A new Postgres connection, closed when the `with` block ends."""
        return connection(self.postgres)

    @property
    def kafka_client(self) -> dict[str, Any]:
        """kafka-python keyword arguments."""
        return kafka_python_config(self.kafka_connection)

    @property
    def spark_kafka(self) -> dict[str, str]:
        """Spark Kafka source options."""
        return spark_kafka_options(self.kafka_connection)

    def as_env(self) -> dict[str, str]:
        """Both connections as AIRFLOW_CONN_* variables: how they reach a child process (never its command line)."""
        return {env_name(c.conn_id): to_env_value(c) for c in (self.kafka_connection, self.postgres_connection)}
