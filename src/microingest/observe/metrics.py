"""Prometheus metrics of every declared pipeline, computed when scraped (a custom collector of prometheus_client).

Per partition: offset lag, time lag, lag state and the time left before retention deletes unread records, from the
same reading the lag page shows. Per pipeline: its state,
the age of its last live commit, and counters and a batch-duration histogram from the batch history. A pipeline
whose figures cannot be read (Postgres away) has microingest_pipeline_up 0 and nothing else in that scrape, rather
than failing every pipeline's scrape.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from datetime import datetime, timezone

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from microingest.declare.pipeline import Pipeline
from microingest.lag.states import LagState
from microingest.lag.status import PipelineStatus, pipeline_status
from microingest.observe.batch_totals import DURATION_BUCKETS, KindTotals, batch_totals
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)
STATES = [s.name for s in LagState]


class PipelineFamilies:
    """The metric families of one scrape, filled pipeline by pipeline (pure: figures in, samples out)."""

    def __init__(self) -> None:
        part = ["pipeline", "topic", "partition"]
        self.offset_lag = GaugeMetricFamily(
            "microingest_offset_lag_records",
            "Records between the pipeline's position and the partition's last stable offset",
            labels=part,
        )
        self.time_lag = GaugeMetricFamily(
            "microingest_time_lag_seconds",
            "Age of the oldest record not ingested (0 when caught up; absent when unknown)",
            labels=part,
        )
        self.partition_state = GaugeMetricFamily(
            "microingest_partition_state",
            "Lag state of the partition: 1 for the current one of OK, WARN, STALL, STOP, ERR",
            labels=[*part, "state"],
        )
        self.horizon = GaugeMetricFamily(
            "microingest_retention_horizon_seconds",
            "Seconds until Kafka's retention may delete the oldest record not ingested (absent when none waits or "
            "no retention limits it)",
            labels=part,
        )
        self.at_risk = GaugeMetricFamily(
            "microingest_retention_at_risk",
            "1 when some partition's horizon is shorter than the declared lag.retention_margin",
            labels=["pipeline"],
        )
        self.pipeline_state = GaugeMetricFamily(
            "microingest_pipeline_state",
            "Lag state of the pipeline (its worst partition's, or ERR): 1 for the current one",
            labels=["pipeline", "state"],
        )
        self.commit_age = GaugeMetricFamily(
            "microingest_last_commit_age_seconds",
            "Seconds since the pipeline last committed a live batch that read records",
            labels=["pipeline"],
        )
        kind = ["pipeline", "kind"]
        self.batches = CounterMetricFamily("microingest_batches", "Committed batches", labels=kind)
        self.records = CounterMetricFamily("microingest_records_read", "Records read by committed batches", labels=kind)
        self.rows = CounterMetricFamily("microingest_rows_written", "Rows written to the target", labels=kind)
        self.dead = CounterMetricFamily("microingest_dead_letters", "Records kept as dead letters", labels=kind)
        self.in_jvm = CounterMetricFamily(
            "microingest_records_decoded_in_jvm",
            "Records the JVM's strict decoder read (the others, the reference decoder in Python workers)",
            labels=kind,
        )
        self.duration = HistogramMetricFamily(
            "microingest_batch_duration_seconds", "Seconds from a batch's start to its commit", labels=kind
        )
        self.up = GaugeMetricFamily(
            "microingest_pipeline_up",
            "1 when this scrape read the pipeline's figures, 0 when it could not (its other metrics are then absent)",
            labels=["pipeline"],
        )

    def add(self, status: PipelineStatus, totals: Iterable[KindTotals], now: datetime) -> None:
        name = status.pipeline
        self.up.add_metric([name], 1)
        for lag, verdict in status.partitions:
            labels = [name, lag.topic, str(lag.partition)]
            self.offset_lag.add_metric(labels, lag.lag)
            if lag.lag == 0:
                self.time_lag.add_metric(labels, 0)
            elif lag.time_lag is not None:
                self.time_lag.add_metric(labels, lag.time_lag.total_seconds())
            for state in STATES:
                self.partition_state.add_metric([*labels, state], 1 if verdict.state.name == state else 0)
            left = status.retention.get(lag.key)
            if left is not None and left.seconds is not None:
                self.horizon.add_metric(labels, left.seconds)
        self.at_risk.add_metric([name], 1 if status.at_risk else 0)
        for state in STATES:
            self.pipeline_state.add_metric([name, state], 1 if status.verdict.state.name == state else 0)
        if status.last_commit is not None:
            self.commit_age.add_metric([name], max((now - status.last_commit).total_seconds(), 0))
        for t in totals:
            labels = [name, t.kind]
            self.batches.add_metric(labels, t.batches)
            self.records.add_metric(labels, t.records_read)
            self.rows.add_metric(labels, t.rows_written)
            self.dead.add_metric(labels, t.dead_letters)
            self.in_jvm.add_metric(labels, t.decoded_in_jvm)
            buckets = [(repr(le), n) for le, n in zip(DURATION_BUCKETS, t.le_counts)] + [("+Inf", t.batches)]
            self.duration.add_metric(labels, buckets, t.seconds)

    def failed(self, pipeline: str) -> None:
        self.up.add_metric([pipeline], 0)

    def all(self) -> list[Metric]:
        return [
            self.offset_lag,
            self.time_lag,
            self.partition_state,
            self.horizon,
            self.at_risk,
            self.pipeline_state,
            self.commit_age,
            self.batches,
            self.records,
            self.rows,
            self.dead,
            self.in_jvm,
            self.duration,
            self.up,
        ]


class PipelineCollector(Collector):
    """Reads every valid declaration's figures on each scrape."""

    def __init__(self, pipelines: Callable[[], list[Pipeline]]):
        self.pipelines = pipelines

    def collect(self) -> Iterable[Metric]:

        families, now = PipelineFamilies(), datetime.now(timezone.utc)
        for pipeline in self.pipelines():
            try:
                systems = PipelineSystems.of(pipeline)
                status = pipeline_status(pipeline, now, last_batches=0, systems=systems)
                with systems.db() as conn:
                    totals = batch_totals(conn, pipeline.name)
            except Exception as exc:  # one pipeline's trouble must not blank every pipeline's metrics
                log.warning("metrics of pipeline %s not read: %s: %s", pipeline.name, type(exc).__name__, exc)
                families.failed(pipeline.name)
                continue
            families.add(status, totals, now)
        return families.all()
