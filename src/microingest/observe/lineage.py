"""What the ingest task reports to OpenLineage (through Airflow's OpenLineage provider): the topic it reads, the
target table and the dead-letter table it writes, with the target's schema from the declaration, row counts as
output statistics, and the run's committed offset ranges as a run facet of microingest's own.

Names follow OpenLineage's naming spec (microingest.observe.datasets): hosts and ports only, never a credential.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import attr
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import RunFacet, output_statistics_output_dataset, schema_dataset

from microingest.batches import CommittedBatch
from microingest.commit.table_shape import declared_shape
from microingest.declare.pipeline import Pipeline
from microingest.observe.announcements import merged_ranges
from microingest.observe.datasets import TableName, topic_dataset
from microingest.systems.connections import ConnectionInfo

DEAD_LETTERS_TABLE = "microingest.dead_letters"


@attr.define
class MicroingestOffsetsRunFacet(RunFacet):
    """The Kafka offsets a run committed: per partition, half-open [from, until), and the batches that did."""

    pipeline: str
    kind: str  # live | backfill | skip | redrive
    batchIds: list[str]
    ranges: list[dict]

    @staticmethod
    def _get_schema() -> str:
        return "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"


@dataclass(frozen=True)
class Lineage:
    inputs: list[InputDataset]
    outputs: list[OutputDataset]
    run_facets: dict[str, RunFacet] = field(default_factory=dict)


def ingest_lineage(
    pipeline: Pipeline,
    kafka: ConnectionInfo,
    postgres: ConnectionInfo,
    kind: str,
    batches: Sequence[CommittedBatch] | None = None,
) -> Lineage:
    """The datasets of a run; with its committed `batches` (after the run, or after it failed), their figures too."""
    # The topics named, and those a pattern's batches read (before a run of a pattern's: none known yet).
    read = {r.topic for b in batches or () for r in b.ranges}
    topics = [topic_dataset(kafka, t) for t in sorted(read | set(pipeline.topics))]
    target = TableName.of(postgres, pipeline.target_table).dataset
    dead = TableName.of(postgres, DEAD_LETTERS_TABLE).dataset
    fields = [
        schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type) for c in declared_shape(pipeline).columns
    ]
    target_stats: dict = {}
    dead_stats: dict = {}
    run_facets: dict = {}
    if batches is not None:
        target_stats["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=sum(b.rows_written for b in batches)
        )
        dead_stats["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=sum(b.dead_letters for b in batches)
        )
        run_facets["microingest_offsets"] = MicroingestOffsetsRunFacet(
            pipeline=pipeline.name,
            kind=kind,
            batchIds=[b.batch_id for b in batches],
            ranges=merged_ranges(r for b in batches for r in b.ranges),
        )
    return Lineage(
        inputs=[InputDataset(namespace=topic.namespace, name=topic.name) for topic in topics],
        outputs=[
            OutputDataset(
                namespace=target.namespace,
                name=target.name,
                outputFacets=target_stats,
                facets={"schema": schema_dataset.SchemaDatasetFacet(fields=fields)},
            ),
            OutputDataset(namespace=dead.namespace, name=dead.name, outputFacets=dead_stats),
        ],
        run_facets=run_facets,
    )
