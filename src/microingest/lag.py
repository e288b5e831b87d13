"""Consumer lag of a pipeline: how far the ledger is behind the end of each partition."""

from __future__ import annotations

from dataclasses import dataclass

from microingest.connections import get_connection, kafka_python_config, postgres_params
from microingest.declarations import Pipeline
from microingest.kafka_access import partition_bounds
from microingest.ledger import connection, read_ledger


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    next_offset: int | None  # None: not ingested yet
    latest: int
    earliest: int

    @property
    def lag(self) -> int:
        start = self.earliest if self.next_offset is None else self.next_offset
        return max(self.latest - start, 0)


def partition_lags(pipeline: Pipeline) -> list[PartitionLag]:
    with connection(postgres_params(get_connection(pipeline.postgres_conn_id))) as conn:
        ledger = read_ledger(conn, pipeline.name, pipeline.topic)
    earliest, latest = partition_bounds(kafka_python_config(get_connection(pipeline.kafka_conn_id)), pipeline.topic)
    return [PartitionLag(pipeline.topic, p, ledger.get(p), latest[p], earliest[p]) for p in sorted(latest)]
