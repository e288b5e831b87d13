"""The retention horizon: how long before Kafka's retention deletes records a pipeline has not read (lag.retention),
and the AT_RISK flag the lag status, its text, the metrics and the SLA check give."""

from datetime import datetime, timedelta, timezone

import pytest

from microingest.declare.time_intervals import duration_seconds
from microingest.lag.figures import PartitionLag
from microingest.lag.retention import Horizon, growth_per_second, horizon
from microingest.lag.states import LagState, Verdict
from microingest.lag.status import PipelineStatus
from microingest.lag.text import status_lines
from microingest.systems.kafka_retention import RetentionLimits

T = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
HOUR = 3600


def lag(position=100, latest=1100, earliest=0, time_lag=timedelta(hours=2), partition=0):
    return PartitionLag("t", partition, position, latest, earliest, time_lag, "record")


def test_by_time_the_oldest_unread_record_goes_once_it_is_retention_ms_old():
    assert horizon(lag(), RetentionLimits(6 * HOUR * 1000, None), None, None) == Horizon(4 * HOUR, None, "retention.ms")
    # older than retention already: Kafka may delete it at its next check
    assert horizon(lag(time_lag=timedelta(hours=7)), RetentionLimits(6 * HOUR * 1000, None), None, None).seconds == 0


def test_by_size_the_unread_bytes_may_grow_to_retention_bytes():
    # 1,100 records in 110,000 bytes: 100 bytes each; 1,000 unread = 100,000 bytes of a 150,000-byte limit
    left = horizon(lag(), RetentionLimits(None, 150_000), 110_000, growth=5.0)
    assert left == Horizon(100.0, 50_000, "retention.bytes")  # 50,000 bytes at 5 records (500 bytes) a second
    assert horizon(lag(), RetentionLimits(None, 150_000), 110_000, growth=None) == Horizon(None, 50_000, "")
    assert horizon(lag(), RetentionLimits(None, 90_000), 110_000, growth=None).seconds == 0  # over the limit now


def test_the_sooner_limit_decides_and_nothing_waiting_is_never_at_risk():
    both = RetentionLimits(6 * HOUR * 1000, 150_000)
    assert horizon(lag(), both, 110_000, growth=5.0).cause == "retention.bytes"
    assert horizon(lag(), both, 110_000, growth=0.001).cause == "retention.ms"
    assert horizon(lag(position=1100), both, 110_000, 5.0) == Horizon()
    assert horizon(lag(), RetentionLimits(None, None), 110_000, 5.0) == Horizon()
    assert horizon(lag(time_lag=None), RetentionLimits(HOUR * 1000, None), None, None) == Horizon()


def test_at_risk_needs_a_margin_and_a_known_horizon():
    assert Horizon(30.0, None, "retention.ms").at_risk(60)
    assert not Horizon(90.0, None, "retention.ms").at_risk(60)
    assert not Horizon(30.0, None, "retention.ms").at_risk(None)
    assert not Horizon().at_risk(60)


def test_growth_is_the_log_ends_rise_per_second_over_the_points():
    points = [(T, 1000), (T + timedelta(seconds=50), 1200), (T + timedelta(seconds=100), 1500)]
    assert growth_per_second(points) == 5.0
    assert growth_per_second(points[:1]) is None and growth_per_second([(T, 5), (T, 9)]) is None


@pytest.mark.parametrize(
    "text, seconds", [("6h", 21600), ("6 hours", 21600), ("90 minutes", 5400), ("2d", 172800), ("45s", 45), (30, 30)]
)
def test_a_margin_is_written_as_seconds_or_a_duration(text, seconds):
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize("text", ["6 weeks", "h", "0h", "-5", 0, True, None, "6.5h"])
def test_a_margin_that_is_no_duration_is_refused(text):
    with pytest.raises(ValueError):
        duration_seconds(text)


def status(margin):
    return PipelineStatus(
        "orders",
        "t",
        Verdict(LagState.OK, "catching up"),
        timedelta(minutes=15),
        partitions=[(lag(), Verdict(LagState.OK, "")), (lag(position=1100, partition=1), Verdict(LagState.OK, ""))],
        retention={("t", 0): Horizon(600.0, None, "retention.ms")},
        retention_margin=margin,
    )


def test_the_status_flags_at_risk_partitions_in_its_dict_and_text():
    risky = status(margin=HOUR)
    assert [p for p, _ in risky.at_risk] == [("t", 0)]
    as_dict = risky.to_dict()
    assert as_dict["at_risk"] is True and as_dict["retention_margin_seconds"] == HOUR
    assert [(p["retention_horizon_seconds"], p["at_risk"]) for p in as_dict["partitions"]] == [
        (600.0, True),
        (None, False),
    ]
    lines = status_lines(risky, T)
    assert "AT_RISK: t[0]'s unread records may be deleted by retention.ms in 10.0min" in lines[2]
    assert "retention" in lines[3] and "10.0min" in lines[4]
    safe = status(margin=300)
    assert not safe.at_risk and not any("AT_RISK" in line for line in status_lines(safe, T))
