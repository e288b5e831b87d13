"""A pipeline's target table as an Airflow Asset: what its DAG announces and downstream DAGs schedule on; and, for a
pipeline woken by records, the Asset its DAG is scheduled on, watched in the triggerer."""

from __future__ import annotations

from airflow.sdk import Asset, AssetWatcher

from microingest.airflow.lag_triggers import RecordsTrigger
from microingest.declare.files import load_declarations
from microingest.declare.pipeline import Pipeline
from microingest.observe.datasets import TableName
from microingest.systems.connections import get_connection


def target_asset(pipeline: Pipeline) -> Asset:
    """postgres://host:port/database/schema/table, named database.schema.table (its OpenLineage name).

    The host comes from the pipeline's Postgres connection, resolved when the DAG is built: a connection that cannot
    be resolved is that pipeline's declaration error, not every pipeline's."""
    table = TableName.of(get_connection(pipeline.postgres_conn_id), pipeline.target_table)
    return Asset(uri=table.asset_uri, name=table.dataset.name, group="microingest")


def records_asset(pipeline: Pipeline) -> Asset:
    """Records waiting for the pipeline on its topic: an event each time RecordsTrigger sees enough of them (the
    on_records thresholds), which starts a run of the pipeline's DAG."""
    wake = pipeline.on_records
    trigger = RecordsTrigger(pipeline.name, wake.poke_seconds, max(wake.max_wait_seconds, wake.poke_seconds))
    return Asset(
        uri=f"x-microingest://records/{pipeline.name}",
        name=f"records waiting for {pipeline.name}",
        group="microingest",
        watchers=[AssetWatcher(name=f"microingest_{pipeline.name}_records", trigger=trigger)],
    )


def asset_of(pipeline_name: str) -> Asset:
    """The target Asset of the declared pipeline `pipeline_name`, for a downstream DAG's schedule."""

    pipelines, _ = load_declarations()
    for pipeline in pipelines:
        if pipeline.name == pipeline_name:
            return target_asset(pipeline)
    raise LookupError(f"no valid declaration of pipeline '{pipeline_name}'")
