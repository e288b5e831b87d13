"""Lag states judged on recorded histories: OK, WARN, STALL, STOP, ERR, and the pipeline's worst partition."""

from datetime import datetime, timedelta, timezone

import pytest

from microingest.lag.states import (
    LagState,
    Observation,
    Rules,
    Verdict,
    default_window,
    evaluate_partition,
    schedule_period,
    worst,
)

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


@pytest.mark.parametrize(
    "schedule, period, window",
    [
        ("*/15 * * * *", timedelta(minutes=15), timedelta(minutes=45)),
        ("@hourly", timedelta(hours=1), timedelta(hours=3)),
        ("* * * * *", timedelta(minutes=1), timedelta(minutes=15)),  # never under 15 minutes
        ("0 9 * * 1-5", timedelta(days=3), timedelta(days=9)),  # the weekend gap counts
    ],
)
def test_the_default_window_spans_several_runs(schedule, period, window):
    assert schedule_period(schedule) == period
    assert default_window(schedule) == window


def test_the_window_leaves_room_for_the_gate_and_for_unscheduled_pipelines():
    assert default_window("*/15 * * * *", max_wait=timedelta(hours=1)) == timedelta(minutes=90)
    assert default_window(None) == timedelta(hours=1)


# Timelines of a pipeline on a quiet topic (window 30 minutes): its runs (or lag checks) observe partition 0 at its
# log end, 500, every 5 minutes while nothing commits, since nothing arrives; then one record arrives.
QUIET_SINCE = NOW - timedelta(hours=10)  # the last commit
ARRIVED = NOW  # the record after the quiet spell


def quiet_spell(until=ARRIVED, every=timedelta(minutes=5)):
    seen, at = [], QUIET_SINCE
    while at < until:
        seen.append(Observation(at, 500, 500))
        at += every
    return seen


def look(history, at, position=500, end=501):
    """What a status look or a lag check judges at `at`: the recorded history and what it just read."""
    return evaluate_partition([*history, Observation(at, position, end)], at, RULES, QUIET_SINCE)


def test_a_record_after_a_quiet_spell_longer_than_the_window_is_not_stop():
    verdict = look(quiet_spell(), ARRIVED + timedelta(minutes=1))
    assert verdict.state is LagState.OK, verdict  # was STOP: "nothing was committed for 10.0h (window 30min)"


def test_a_record_after_a_quiet_spell_is_not_stall_either():
    # Runs every minute on the quiet topic, the last commit within the window: the observations that saw it caught up
    # show a position that did not move, but no records waited then.
    history = [Observation(ARRIVED - timedelta(minutes=m), 500, 500) for m in range(20, 0, -1)]
    verdict = evaluate_partition(
        [*history, Observation(ARRIVED + timedelta(seconds=30), 500, 501)],
        ARRIVED + timedelta(seconds=30),
        RULES,
        ARRIVED - timedelta(minutes=20),
    )
    assert verdict.state is LagState.OK, verdict  # was STALL: "position stuck at 500 for 9min while 1 records wait"


def test_runs_that_stop_while_the_record_waits_are_stop_one_window_after_the_partition_was_last_caught_up():
    history = quiet_spell()  # last seen caught up 5 minutes before the record arrived; nothing records since
    assert look(history, ARRIVED + timedelta(minutes=24)).state is LagState.OK
    verdict = look(history, ARRIVED + timedelta(minutes=26))
    assert verdict.state is LagState.STOP, verdict
    assert verdict.reason == (
        "1 records wait: the partition was last seen caught up 31min ago and nothing was committed since (window 30min)"
    )


def test_stuck_since_it_was_last_caught_up_while_the_pipeline_commits_is_stall():
    # The pipeline commits (other partitions move); this one was caught up 25 minutes ago and has not moved since.
    history = [(30, 500, 500), (25, 500, 500), (20, 500, 510), (15, 500, 530), (10, 500, 560), (5, 500, 580)]
    verdict = judge(history, last_commit_minutes_ago=2)
    assert verdict.state is LagState.STALL and "position stuck at 500 for 20min" in verdict.reason
    # Its first two observations with records waiting are too few to call it stuck.
    assert judge(history[:4], last_commit_minutes_ago=2).state is LagState.OK


def test_a_pipeline_that_never_committed_is_judged_from_when_it_was_last_caught_up():
    # start_from: latest pins a new partition at its log end; no batch has read a record yet.
    history = [Observation(ARRIVED - timedelta(minutes=m), 500, 500) for m in (15, 10, 5)]
    at = ARRIVED + timedelta(minutes=1)
    assert evaluate_partition([*history, Observation(at, 500, 501)], at, RULES, None).state is LagState.OK
    at = ARRIVED + timedelta(minutes=40)
    verdict = evaluate_partition([*history, Observation(at, 500, 501)], at, RULES, None)
    assert verdict.state is LagState.STOP and "45min ago and the pipeline has never committed" in verdict.reason


def test_where_burrow_says_ok_for_a_zero_lag_in_the_window_microingest_judges_what_came_after_it():
    """Burrow's rule 1: any zero lag among the window's observations makes the partition OK. Here a zero lag only
    starts the trend afresh (docs/lag.md, "Where the rules differ from Burrow's"): the window spans several runs, so
    a zero there can be 25 minutes old while the partition falls behind or stands still ever since."""
    falling_behind = [(30, 500, 500), (20, 550, 600), (15, 600, 700), (10, 650, 800), (5, 700, 900)]
    assert any(lag == 0 for _, lag in ((m, e - p) for m, p, e in falling_behind))  # Burrow: OK
    verdict = judge(falling_behind)
    assert verdict.state is LagState.WARN and "50 → 200" in verdict.reason
    standing_still = [(30, 500, 500), (20, 500, 600), (15, 500, 700), (10, 500, 800)]
    assert judge(standing_still, last_commit_minutes_ago=2).state is LagState.STALL  # Burrow: OK as well
    # Where they agree: a zero lag followed by a lag that shrinks, or one observation of lag too few to call a trend.
    assert judge([(30, 500, 500), (20, 550, 700), (15, 650, 750), (5, 760, 800)]).state is LagState.OK
    assert judge([(30, 500, 500), (5, 500, 600)]).state is LagState.OK
