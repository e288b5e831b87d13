"""The Kafka source's options for a batch: the platform's reader group unless the Kafka connection names its own (for
group-based authorization), as the README promises."""

import json

from microingest.batches import Batch, OffsetRange
from microingest.spark.batch import reader_group, reader_options
from microingest.systems.connections import parse_connection, spark_kafka_options

BATCH = Batch("ingest", (OffsetRange("orders", 0, 5, 9, None),))


def kafka(extra: str) -> dict[str, str]:
    return spark_kafka_options(parse_connection("k", f'{{"conn_type": "kafka", "extra": {extra}}}'))


def test_the_executors_read_in_the_pipelines_reader_group():
    options = reader_options(kafka('{"bootstrap.servers": "b:1"}'), BATCH, reader_group("orders"))
    assert options["kafka.group.id"] == "microingest-orders-reader"
    assert options["kafka.bootstrap.servers"] == "b:1"
    assert json.loads(options["assign"]) == {"orders": [0]}


def test_a_group_id_in_the_connections_extra_wins():
    options = reader_options(kafka('{"bootstrap.servers": "b:1", "group.id": "team-acl-group"}'), BATCH, "ignored")
    assert options["kafka.group.id"] == "team-acl-group"
