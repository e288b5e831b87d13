"""Consumer lag of a pipeline: how far the ledger is behind the end of each partition."""

from __future__ import annotations

from dataclasses import dataclass

from microingest.declarations import Pipeline
from microingest.live_planning import observe


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
    ledger, earliest, latest = observe(pipeline)
    return [PartitionLag(pipeline.topic, p, ledger.get(p), latest[p], earliest[p]) for p in sorted(latest)]
