"""Lag states: does a pipeline keep up? Judged per partition over a sliding window, in the spirit of Burrow's rules.

Inputs per partition: the observations inside the window (each: when, the ledger position, the last stable offset),
the pipeline's last commit, and any error of its latest planning. Rules, first match wins:

  ERR    the latest planning failed (Kafka or Postgres unreachable, a retention gap it may not skip, ...)
  OK     no lag now: the position is at the last stable offset (an idle producer is not a lagging consumer)
  STOP   records wait, and the pipeline has committed nothing for longer than the window (or never): not running
  STALL  records wait and the pipeline commits, but this partition's position did not move across the window
         (or it was never started)
  WARN   the position moves but the lag did not shrink between any two consecutive observations of the window
The trend rules read at most the `sample` latest observations of the window.
  OK     otherwise (also when the window holds fewer than `min_observations`: too little to call a trend)

The pipeline's state is its worst partition's. The window should span several runs: by default three schedule
periods, at least the gate's maximum wait plus two periods, and never under 15 minutes (an hour for pipelines
without a schedule).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Iterable, Sequence

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
    return max(b - a for a, b in zip(fires[1:], fires[2:])) if len(fires) > 2 else fires[1] - fires[0]


def evaluate_partition(observations: Sequence[Observation], now: datetime, rules: Rules,
                       last_commit: datetime | None, error: str | None = None) -> Verdict:
    if error:
        return Verdict(LagState.ERR, error)
    if not observations:
        return Verdict(LagState.OK, "not observed yet")
    latest = max(observations, key=lambda o: o.at)
    if latest.lag == 0:
        return Verdict(LagState.OK, "caught up")
    if last_commit is None:
        return Verdict(LagState.STOP, f"{latest.lag:,} records wait and the pipeline has never committed")
    idle = now - last_commit
    if idle > rules.window:
        return Verdict(LagState.STOP, f"{latest.lag:,} records wait and nothing was committed for "
                                      f"{_span(idle)} (window {_span(rules.window)})")
    window = sorted((o for o in observations if o.at >= now - rules.window), key=lambda o: o.at)[-rules.sample:]
    if len(window) < rules.min_observations:
        return Verdict(LagState.OK, f"{latest.lag:,} records behind; {len(window)} observation(s) in the window, "
                                    f"too few to judge a trend")
    if window[0].position == window[-1].position:
        where = "not started" if window[-1].position is None else f"stuck at {window[-1].position:,}"
        return Verdict(LagState.STALL, f"position {where} for {_span(now - window[0].at)} while {latest.lag:,} "
                                       "records wait")
    lags = [o.lag for o in window]
    if all(b >= a for a, b in zip(lags, lags[1:])):
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
