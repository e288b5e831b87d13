"""Lag states: does a pipeline keep up? Judged per partition over a sliding window, in the spirit of Burrow's rules.

Inputs per partition: the observations inside the window (each: when, the ledger position, the last stable offset),
the pipeline's last commit, and any error of its latest planning. Rules, first match wins:

  ERR    the latest planning failed (Kafka or Postgres unreachable, a retention gap it may not skip, ...)
  OK     no lag now: the position is at the last stable offset (an idle producer is not a lagging consumer)
  STOP   records wait, and for longer than the window the pipeline has committed nothing and the partition was not
         seen caught up (or it never committed and was never seen caught up): not running
  STALL  records wait and the pipeline commits, but this partition's position did not move across the window
         (or it was never started)
  WARN   the position moves but the lag did not shrink between any two consecutive observations of the window
The trend rules read at most the `sample` latest observations of the window made since the partition was last seen
caught up.
  OK     otherwise (also when the window holds fewer than `min_observations`: too little to call a trend)

Idleness counts from the later of the last commit and the last observation that saw the partition caught up (its
position at the last stable offset), as Burrow's stopped rule weighs the time since the last commit against the age
of the lag: a pipeline on a quiet topic commits nothing, and the first record after a quiet spell longer than the
window is work that just arrived, not a stop. Being caught up once excuses no more than that: a partition stuck ever
since is STOP one window later (Burrow calls a partition OK as long as any zero lag stays in its window).

The pipeline's state is its worst partition's. The window should span several runs: by default three schedule
periods, at least the gate's maximum wait plus two periods, and never under 15 minutes (an hour for pipelines
without a schedule).
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

MIN_WINDOW = timedelta(minutes=15)
UNSCHEDULED_WINDOW = timedelta(hours=1)


class LagState(enum.IntEnum):
    """Ordered by severity: a pipeline is as bad as its worst partition."""

    OK = 0
    WARN = 1
    STALL = 2
    STOP = 3
    ERR = 4


@dataclass(frozen=True)
class Observation:
    at: datetime
    position: int | None  # the ledger's next offset to read; None: the partition was not started yet
    end: int  # the last stable offset Kafka reported

    @property
    def lag(self) -> int:
        return max(self.end - (self.position or 0), 0)

    @property
    def caught_up(self) -> bool:
        return self.lag == 0


@dataclass(frozen=True)
class Verdict:
    state: LagState
    reason: str


@dataclass(frozen=True)
class Rules:
    window: timedelta = UNSCHEDULED_WINDOW
    min_observations: int = 3  # fewer in the window: no trend is called
    sample: int = 10  # the trend (STALL, WARN) is read from at most this many latest observations of the window


def default_window(schedule: str | None, max_wait: timedelta | None = None) -> timedelta:
    """Three schedule periods, at least the gate's wait plus two periods, never under MIN_WINDOW."""
    if not schedule:
        return UNSCHEDULED_WINDOW
    period = schedule_period(schedule)
    return max(3 * period, (max_wait or timedelta(0)) + 2 * period, MIN_WINDOW)


def schedule_period(schedule: str) -> timedelta:
    """The longest gap between consecutive runs of a cron schedule within a week (irregular crons included)."""
    from croniter import croniter

    start = datetime(2026, 1, 5)  # a Monday: the week after covers every weekday pattern
    it, fires = croniter(schedule, start), [start]
    while len(fires) < 2 or (fires[-1] < start + timedelta(days=7) and len(fires) < 2000):
        fires.append(it.get_next(datetime))
    return max(b - a for a, b in itertools.pairwise(fires[1:])) if len(fires) > 2 else fires[1] - fires[0]


def evaluate_partition(
    observations: Sequence[Observation],
    now: datetime,
    rules: Rules,
    last_commit: datetime | None,
    error: str | None = None,
) -> Verdict:
    if error:
        return Verdict(LagState.ERR, error)
    if not observations:
        return Verdict(LagState.OK, "not observed yet")
    latest = max(observations, key=lambda o: o.at)
    if latest.caught_up:
        return Verdict(LagState.OK, "caught up")
    caught_up = last_caught_up(observations)
    return _stopped(latest, now, rules, last_commit, caught_up) or _trend(observations, latest, now, rules, caught_up)


def last_caught_up(observations: Iterable[Observation]) -> datetime | None:
    """When the partition was last seen at its last stable offset."""
    return max((o.at for o in observations if o.caught_up), default=None)


def _stopped(
    latest: Observation, now: datetime, rules: Rules, last_commit: datetime | None, caught_up: datetime | None
) -> Verdict | None:
    waiting = f"{latest.lag:,} records wait"
    if last_commit is None and caught_up is None:
        return Verdict(LagState.STOP, f"{waiting} and the pipeline has never committed")
    since = max(t for t in (last_commit, caught_up) if t is not None)
    idle = now - since
    if idle <= rules.window:
        return None
    if since == last_commit:
        return Verdict(
            LagState.STOP, f"{waiting} and nothing was committed for {_span(idle)} (window {_span(rules.window)})"
        )
    committed = "the pipeline has never committed" if last_commit is None else "nothing was committed since"
    return Verdict(
        LagState.STOP,
        f"{waiting}: the partition was last seen caught up {_span(idle)} ago and "
        f"{committed} (window {_span(rules.window)})",
    )


def _trend(
    observations: Sequence[Observation], latest: Observation, now: datetime, rules: Rules, caught_up: datetime | None
) -> Verdict:
    # Up to the last caught-up observation no records waited: a position that did not move then is no stall.
    window = sorted(
        (o for o in observations if o.at >= now - rules.window and (caught_up is None or o.at > caught_up)),
        key=lambda o: o.at,
    )[-rules.sample :]
    if len(window) < rules.min_observations:
        return Verdict(
            LagState.OK,
            f"{latest.lag:,} records behind; {len(window)} observation(s) in the window, too few to judge a trend",
        )
    if window[0].position == window[-1].position:
        where = "not started" if window[-1].position is None else f"stuck at {window[-1].position:,}"
        return Verdict(
            LagState.STALL, f"position {where} for {_span(now - window[0].at)} while {latest.lag:,} records wait"
        )
    lags = [o.lag for o in window]
    if all(b >= a for a, b in itertools.pairwise(lags)):
        return Verdict(LagState.WARN, f"lag not shrinking over the window: {lags[0]:,} → {lags[-1]:,} records")
    return Verdict(LagState.OK, f"{latest.lag:,} records behind and catching up")


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    verdicts = list(verdicts)
    return max(verdicts, key=lambda v: v.state) if verdicts else Verdict(LagState.OK, "no partitions")


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}min"
    return f"{seconds / 3600:.1f}h"
