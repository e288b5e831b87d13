import json
from datetime import datetime, timezone

from openlineage.client.serde import Serde

from microingest.batches import CommittedBatch, OffsetRange
from microingest.declare.validate import parse_pipeline
from microingest.observe.lineage import ingest_lineage
from microingest.systems.connections import parse_connection

PG = parse_connection("pg", "postgresql://ingest:pg-s3cret@db.example:5433/warehouse")
KAFKA = parse_connection(
    "k",
    json.dumps(
        {
            "conn_type": "kafka",
            "extra": {"bootstrap.servers": "b1.example:9093", "sasl.username": "u", "sasl.password": "kafka-s3cret"},
        }
    ),
)
T = datetime(2026, 11, 25, tzinfo=timezone.utc)


def pipeline():
    return parse_pipeline(
        {
            "name": "orders",
            "topic": "orders-v1",
            "target_table": "sales.orders",
            "schema": {"order_id": {"type": "string", "required": True}, "total": "double"},
        }
    )


def test_before_the_run_only_the_datasets_and_the_targets_schema():
    lineage = ingest_lineage(pipeline(), KAFKA, PG, "live")
    [topic] = lineage.inputs
    assert (topic.namespace, topic.name) == ("kafka://b1.example:9093", "orders-v1")
    target, dead = lineage.outputs
    assert (target.namespace, target.name) == ("postgres://db.example:5433", "warehouse.sales.orders")
    assert dead.name == "warehouse.microingest.dead_letters"
    fields = {f.name: f.type for f in target.facets["schema"].fields}
    assert fields["order_id"] == "text" and fields["total"] == "double precision"
    assert fields["source_offset"] == "bigint"
    assert not target.outputFacets and lineage.run_facets == {}


def test_after_the_run_its_counts_and_offsets_without_any_credential():
    batches = [
        CommittedBatch("b1", "ingest", 1, (OffsetRange("orders-v1", 0, 0, 60, None),), 60, 58, 2, T, T),
        CommittedBatch("b2", "ingest", 2, (OffsetRange("orders-v1", 0, 60, 90, 60),), 30, 30, 0, T, T),
    ]
    lineage = ingest_lineage(pipeline(), KAFKA, PG, "live", batches)
    target, dead = lineage.outputs
    assert target.outputFacets["outputStatistics"].rowCount == 88
    assert dead.outputFacets["outputStatistics"].rowCount == 2
    offsets = lineage.run_facets["microingest_offsets"]
    assert (offsets.kind, offsets.batchIds) == ("live", ["b1", "b2"])
    assert offsets.ranges == [{"topic": "orders-v1", "partition": 0, "from": 0, "until": 90}]
    text = json.dumps([json.loads(Serde.to_json(x)) for x in [*lineage.inputs, *lineage.outputs, offsets]])
    assert "s3cret" not in text and "ingest:" not in text and "sasl" not in text
