"""What every batch of one ingest job shares, set up once when the job starts."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from microingest import settings
from microingest.batches import RunInfo
from microingest.declare.pipeline import Pipeline
from microingest.lag.mirror import GroupMirror
from microingest.spark.jvm_decode import JvmDecoding, prepare
from microingest.systems.pipeline_systems import PipelineSystems


@dataclass(frozen=True)
class IngestJob:
    spark: Any  # a SparkSession, classic or Spark Connect
    pipeline: Pipeline
    systems: PipelineSystems
    run: RunInfo  # who asked, and the Spark application the history records for each batch
    mirror: GroupMirror | None = None  # live positions mirrored to the pipeline's consumer group
    jvm: JvmDecoding | None = None  # the pipeline's decoding function in Spark's JVM, where it has one
    read_ahead: bool = True  # the next batch read while one commits (`run.run_plan`)

    @classmethod
    def start(cls, spark, pipeline: Pipeline, systems: PipelineSystems, run: RunInfo) -> IngestJob:
        run = replace(run, spark_app_id=spark.conf.get("spark.app.id"))
        mirror = GroupMirror(systems.kafka_client, pipeline.name)
        jvm = prepare(spark, pipeline, systems.registry)
        return cls(spark, pipeline, systems, run, mirror, jvm, settings.read_ahead())

    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.close()
