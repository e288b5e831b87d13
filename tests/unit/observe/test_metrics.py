from datetime import datetime, timedelta, timezone

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from microingest.lag.figures import PartitionLag
from microingest.lag.retention import Horizon
from microingest.lag.states import LagState, Verdict
from microingest.lag.status import PipelineStatus
from microingest.observe.batch_totals import DURATION_BUCKETS, KindTotals
from microingest.observe.metrics import PipelineFamilies

NOW = datetime(2026, 11, 25, 12, tzinfo=timezone.utc)


def scrape(families: PipelineFamilies) -> dict:
    class Once:
        def collect(self):
            return families.all()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Once())
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_a_pipelines_figures_become_samples_named_by_prometheus_conventions():
    status = PipelineStatus(
        "orders",
        "t",
        Verdict(LagState.WARN, "behind"),
        timedelta(minutes=5),
        last_commit=NOW - timedelta(seconds=90),
        partitions=[
            (PartitionLag("t", 0, 100, 150, 0, timedelta(seconds=30), "record"), Verdict(LagState.WARN, "behind")),
            (PartitionLag("t", 1, 40, 40, 0), Verdict(LagState.OK, "")),
            (PartitionLag("t", 2, None, 10, 0), Verdict(LagState.OK, "")),
        ],
        retention={("t", 0): Horizon(600.0, None, "retention.ms")},
        retention_margin=3600,
    )
    les = (0, 1, 2, 2, 3, 3, 3, 3, 3, 3)
    families = PipelineFamilies()
    families.add(status, [KindTotals("ingest", 3, 3000, 2990, 10, 9.5, les, decoded_in_jvm=2950)], NOW)
    families.failed("broken")
    samples = scrape(families)

    def at(name, **labels):
        return samples[(name, tuple(sorted(labels.items())))]

    p0, p2 = (
        {"pipeline": "orders", "topic": "t", "partition": "0"},
        {"pipeline": "orders", "topic": "t", "partition": "2"},
    )
    assert at("microingest_offset_lag_records", **p0) == 50 and at("microingest_time_lag_seconds", **p0) == 30
    assert ("microingest_time_lag_seconds", tuple(sorted(p2.items()))) not in samples  # lagging, age unknown
    assert at("microingest_offset_lag_records", **p2) == 10
    assert at("microingest_partition_state", state="WARN", **p0) == 1
    assert at("microingest_partition_state", state="OK", **p0) == 0
    assert at("microingest_pipeline_state", pipeline="orders", state="WARN") == 1
    assert at("microingest_retention_horizon_seconds", **p0) == 600
    assert ("microingest_retention_horizon_seconds", tuple(sorted(p2.items()))) not in samples
    assert at("microingest_retention_at_risk", pipeline="orders") == 1
    assert at("microingest_last_commit_age_seconds", pipeline="orders") == 90
    kind = {"pipeline": "orders", "kind": "ingest"}
    assert at("microingest_batches_total", **kind) == 3 and at("microingest_records_read_total", **kind) == 3000
    assert at("microingest_rows_written_total", **kind) == 2990 and at("microingest_dead_letters_total", **kind) == 10
    assert at("microingest_records_decoded_in_jvm_total", **kind) == 2950
    assert at("microingest_batch_duration_seconds_bucket", le="2.5", **kind) == 2
    assert at("microingest_batch_duration_seconds_bucket", le="+Inf", **kind) == 3
    assert at("microingest_batch_duration_seconds_count", **kind) == 3
    assert at("microingest_batch_duration_seconds_sum", **kind) == 9.5
    assert at("microingest_pipeline_up", pipeline="broken") == 0
    assert at("microingest_pipeline_up", pipeline="orders") == 1
    assert len(DURATION_BUCKETS) == len(les)


def test_the_grafana_dashboard_asks_only_for_metrics_the_endpoint_serves():
    import json
    import re
    from pathlib import Path

    families = PipelineFamilies()
    served = {
        f.name + suffix
        for f in families.all()
        for suffix in {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(f.type, ("",))
    }
    dashboard = json.loads((Path(__file__).resolve().parents[3] / "docs" / "grafana-dashboard.json").read_text())
    asked = {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"microingest_\w+", t["expr"])}
    asked |= set(re.findall(r"microingest_\w+", json.dumps(dashboard["templating"])))
    assert asked and asked <= served, asked - served
