"""The lag page's AT_RISK badge, line and retention column, rendered from a status (the page itself, behind login,
is tested in a browser by tests/integration/airflow/test_lag_page.py)."""

from datetime import datetime, timedelta, timezone

from microingest.airflow.lag_page import render
from microingest.lag.figures import PartitionLag
from microingest.lag.retention import Horizon
from microingest.lag.states import LagState, Verdict
from microingest.lag.status import PipelineStatus

NOW = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)


def page(margin):
    status = PipelineStatus(
        "orders",
        "orders",
        Verdict(LagState.OK, "catching up"),
        timedelta(minutes=15),
        partitions=[
            (PartitionLag("orders", 0, 100, 1100, 0, timedelta(hours=5), "record"), Verdict(LagState.OK, "")),
            (PartitionLag("orders", 1, 500, 500, 0, timedelta(0)), Verdict(LagState.OK, "caught up")),
        ],
        retention={("orders", 0): Horizon(600.0, None, "retention.ms")},
        retention_margin=margin,
    )
    return render([(status, [])], NOW, [])


def test_a_partition_at_risk_is_flagged_with_its_horizon():
    html = " ".join(page(margin=6 * 3600).split())
    assert html.count(">AT_RISK</span>") == 2  # the summary row and the pipeline's heading
    assert "orders[0]: records not yet read may be deleted by retention.ms in 10.0min (retention_margin 6.0h)" in html
    assert "<th>retention left</th>" in html and "<td>10.0min</td>" in html


def test_within_the_margin_the_horizon_shows_and_nothing_is_flagged():
    html = " ".join(page(margin=300).split())
    assert ">AT_RISK</span>" not in html and "<td>10.0min</td>" in html
