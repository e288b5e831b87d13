"""How the outside world names a pipeline's source and target: OpenLineage's dataset naming (namespace + name) and
Airflow's Postgres asset URI. Host and port only: a name is shown to anyone, so no login, password or query ever
goes into it."""

from __future__ import annotations

from dataclasses import dataclass

from microingest.declare.identifiers import split_table_name
from microingest.systems.connections import ConnectionInfo, kafka_bootstrap, postgres_params


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str


def topic_dataset(kafka: ConnectionInfo, topic: str) -> Dataset:
    """kafka://{first bootstrap server}, the topic as name (OpenLineage naming spec)."""
    first = kafka_bootstrap(kafka).split(",")[0].strip()
    return Dataset(f"kafka://{first}", topic)


@dataclass(frozen=True)
class TableName:
    host: str
    port: int
    database: str
    schema: str
    table: str

    @classmethod
    def of(cls, postgres: ConnectionInfo, target_table: str) -> TableName:
        params = postgres_params(postgres)
        schema, table = split_table_name(target_table)
        return cls(params["host"], int(params["port"]), params["dbname"], schema, table)

    @property
    def dataset(self) -> Dataset:
        """postgres://host:port, database.schema.table (OpenLineage naming spec)."""
        return Dataset(f"postgres://{self.host}:{self.port}", f"{self.database}.{self.schema}.{self.table}")

    @property
    def asset_uri(self) -> str:
        """postgres://host:port/database/schema/table, Airflow's Postgres asset URI."""
        return f"postgres://{self.host}:{self.port}/{self.database}/{self.schema}/{self.table}"
