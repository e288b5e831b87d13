"""Lag states judged on recorded histories: OK, WARN, STALL, STOP, ERR, and the pipeline's worst partition."""

from datetime import datetime, timedelta, timezone

import pytest

from microingest.lag.states import (LagState, Observation, Rules, Verdict, default_window, evaluate_partition,
                                    schedule_period, worst)

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
RULES = Rules(window=timedelta(minutes=30), min_observations=3)


def history(*rows):
    """(minutes ago, position, log end) -> observations"""
    return [Observation(NOW - timedelta(minutes=m), pos, end) for m, pos, end in rows]


def judge(rows, last_commit_minutes_ago=1, error=None):
    last = None if last_commit_minutes_ago is None else NOW - timedelta(minutes=last_commit_minutes_ago)
    return evaluate_partition(history(*rows), NOW, RULES, last, error)


def test_caught_up_is_ok_even_without_commits_for_hours():
    verdict = judge([(25, 100, 100), (15, 100, 100), (5, 100, 100)], last_commit_minutes_ago=600)
    assert verdict == Verdict(LagState.OK, "caught up")


def test_catching_up_is_ok():
    assert judge([(25, 0, 1000), (15, 400, 1100), (5, 900, 1200)]).state is LagState.OK


def test_lag_that_does_not_shrink_while_the_position_moves_is_warn():
    verdict = judge([(25, 0, 1000), (15, 400, 1400), (5, 800, 1900)])
    assert verdict.state is LagState.WARN and "1,000 → 1,100" in verdict.reason
    assert judge([(25, 0, 500), (15, 100, 600), (5, 200, 700)]).state is LagState.WARN  # flat lag: not catching up


def test_a_position_that_does_not_move_while_records_wait_is_stall():
    verdict = judge([(25, 300, 1000), (15, 300, 1000), (5, 300, 1200)], last_commit_minutes_ago=3)
    assert verdict.state is LagState.STALL and "position stuck at 300" in verdict.reason


def test_no_commit_for_longer_than_the_window_while_records_wait_is_stop():
    verdict = judge([(25, 300, 1000), (15, 300, 1000), (5, 300, 1000)], last_commit_minutes_ago=45)
    assert verdict.state is LagState.STOP and "nothing was committed for 45min (window 30min)" in verdict.reason
    assert judge([(5, 0, 10)], last_commit_minutes_ago=None).state is LagState.STOP


def test_a_planning_error_is_err_whatever_the_figures():
    verdict = judge([(5, 100, 100)], error="retention gap on t[0]: offsets 10..99 deleted")
    assert verdict == Verdict(LagState.ERR, "retention gap on t[0]: offsets 10..99 deleted")


def test_too_few_observations_in_the_window_call_no_trend():
    verdict = judge([(90, 0, 1000), (5, 0, 2000)])  # the older one is outside the window
    assert verdict.state is LagState.OK and "too few" in verdict.reason


def test_the_pipeline_is_as_bad_as_its_worst_partition():
    verdicts = [Verdict(LagState.OK, "a"), Verdict(LagState.STALL, "b"), Verdict(LagState.WARN, "c")]
    assert worst(verdicts) == Verdict(LagState.STALL, "b")
    assert worst([]).state is LagState.OK


@pytest.mark.parametrize("schedule, period, window", [
    ("*/15 * * * *", timedelta(minutes=15), timedelta(minutes=45)),
    ("@hourly", timedelta(hours=1), timedelta(hours=3)),
    ("* * * * *", timedelta(minutes=1), timedelta(minutes=15)),  # never under 15 minutes
    ("0 9 * * 1-5", timedelta(days=3), timedelta(days=9)),  # the weekend gap counts
])
def test_the_default_window_spans_several_runs(schedule, period, window):
    assert schedule_period(schedule) == period
    assert default_window(schedule) == window


def test_the_window_leaves_room_for_the_gate_and_for_unscheduled_pipelines():
    assert default_window("*/15 * * * *", max_wait=timedelta(hours=1)) == timedelta(minutes=90)
    assert default_window(None) == timedelta(hours=1)
