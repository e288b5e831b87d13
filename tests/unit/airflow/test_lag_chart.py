"""The lag page's chart spans from its first observation to now, so a young pipeline's minutes fill the width."""

import re
from datetime import datetime, timedelta, timezone

from microingest.airflow.lag_page import chart

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def test_the_chart_spans_from_the_first_observation_to_now():
    series = [(NOW - timedelta(minutes=5), 100), (NOW - timedelta(minutes=2), 400), (NOW, 0)]
    svg = chart(series, NOW, width=500, height=100)
    points = [tuple(map(float, p.split(","))) for p in re.search(r'points="([^"]+)"', svg).group(1).split()]
    assert [x for x, _ in points] == [0.0, 300.0, 500.0]
    assert [y for _, y in points] == [100 - 100 / 400 * 90, 10.0, 100.0]
    assert ">-5.0min<" in svg and ">400 records<" in svg


def test_too_few_observations_say_so():
    assert "fewer than two observations" in chart([(NOW, 3)], NOW)
