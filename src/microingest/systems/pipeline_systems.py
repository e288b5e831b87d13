"""A pipeline's Postgres and Kafka, resolved from their connections once and handed to whatever needs them.

Resolving a connection can be a round trip to Airflow's metastore, and a connection edited while a task runs would
otherwise give the two halves of one task two different servers: an entry point (a task, a job, a command) resolves
once, as a provider hook resolves its client once, and passes this on.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from microingest.systems.connections import (
    ConnectionConfigError,
    ConnectionInfo,
    env_name,
    get_connection,
    kafka_python_config,
    postgres_params,
    schema_registry_config,
    spark_kafka_options,
    to_env_value,
)
from microingest.systems.postgres import connection


@dataclass(frozen=True)
class PipelineSystems:
    postgres_connection: ConnectionInfo
    kafka_connection: ConnectionInfo
    registry_conn_id: str | None = None  # only for a pipeline whose values name a registry schema
    mask_conn_id: str | None = None  # only for a pipeline with a keyed hash among its masks

    @classmethod
    def of(cls, pipeline) -> PipelineSystems:
        registry = pipeline.schema_registry_conn_id if pipeline.reads_registry else None
        return cls(
            get_connection(pipeline.postgres_conn_id),
            get_connection(pipeline.kafka_conn_id),
            registry,
            pipeline.mask_conn_id,
        )

    @cached_property
    def mask_connection(self) -> ConnectionInfo | None:
        return None if self.mask_conn_id is None else get_connection(self.mask_conn_id)

    @property
    def mask_key(self) -> bytes | None:
        """The keyed hash's key: the password of the pipeline's mask connection."""
        connection_info = self.mask_connection
        if connection_info is None:
            return None
        if not connection_info.password:
            raise ConnectionConfigError(f"connection '{connection_info.conn_id}' has no password: the mask key")
        return connection_info.password.encode("utf-8")

    @cached_property
    def registry_connection(self) -> ConnectionInfo | None:
        """Resolved when first asked (by the job and its operator, not by the lag checks, which never read values)."""
        return None if self.registry_conn_id is None else get_connection(self.registry_conn_id)

    @property
    def postgres(self) -> dict[str, Any]:
        """psycopg2.connect() keyword arguments."""
        return postgres_params(self.postgres_connection)

    def db(self) -> AbstractContextManager[Any]:
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

    @property
    def registry(self) -> dict[str, str] | None:
        """confluent_kafka SchemaRegistryClient settings, or None when the pipeline reads no framed values."""
        return None if self.registry_connection is None else schema_registry_config(self.registry_connection)

    def as_env(self) -> dict[str, str]:
        """The connections as AIRFLOW_CONN_* variables: how they reach a child process (never its command line)."""
        return {
            env_name(c.conn_id): to_env_value(c)
            for c in (self.kafka_connection, self.postgres_connection, self.registry_connection, self.mask_connection)
            if c is not None
        }
