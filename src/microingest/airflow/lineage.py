"""The ingest operator's OpenLineage facets, in the form Airflow's OpenLineage provider collects them
(OperatorLineage); what they say is microingest.observe.lineage's."""

from __future__ import annotations

from airflow.providers.openlineage.extractors import OperatorLineage

from microingest.commit.history import batches_of_run
from microingest.declare.pipeline import Pipeline
from microingest.observe.lineage import ingest_lineage
from microingest.systems.pipeline_systems import PipelineSystems


def operator_lineage(pipeline: Pipeline, systems: PipelineSystems, kind: str, task_instance=None) -> OperatorLineage:
    """Datasets only before the run (no `task_instance`); after it, succeeded or failed, with what the run committed
    over all its tries, read from the batch history."""
    batches = None
    if task_instance is not None:
        with systems.db() as conn:
            batches = batches_of_run(conn, pipeline.name, task_instance.dag_id, task_instance.run_id)
    lineage = ingest_lineage(pipeline, systems.kafka_connection, systems.postgres_connection, kind, batches)
    return OperatorLineage(inputs=lineage.inputs, outputs=lineage.outputs, run_facets=lineage.run_facets)
