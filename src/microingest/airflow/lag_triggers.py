"""The triggers of the lag checks, run in Airflow's triggerer (holding no worker slot), importable from the
installed package:

- LagTrigger, which the lag sensors defer to: it asks one of the lag checks (gate: enough work? health: within the
  SLA?) every `poke_seconds`, in a thread (the checks use kafka-python and psycopg2, which block), and fires once the
  answer is yes or the deadline has passed.
- RecordsTrigger, the AssetWatcher of a pipeline woken by records (`schedule: on_records`): it asks the same gate
  check with the `on_records` thresholds for as long as the DAG exists, and each time records are waiting enough it
  fires an event that wakes the DAG (at most once per max_wait_seconds). It only reads positions: it commits nothing
  to Kafka and decides no offset; the run it wakes plans from the ledger like any.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime, timezone
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

CHECKS = ("gate", "health", "wake")


def run_check(check: str, pipeline_name: str) -> dict:
    """One poke: the named check of the pipeline's declared policy, as a dict (what the event carries)."""
    # At poke time: the DAG files import this module (through the sensors), and the checks bring Kafka and Postgres.
    from microingest.declare.files import get_pipeline
    from microingest.lag.checks import gate_check, health_check

    pipeline = get_pipeline(pipeline_name)
    if check == "gate":
        return gate_check(pipeline, pipeline.lag.declared_gate()).to_dict()
    if check == "wake":
        return gate_check(pipeline, pipeline.on_records.gate()).to_dict()
    return health_check(pipeline, pipeline.lag.declared_sla()).to_dict()


def outcome(status: str, pokes: int, result: dict) -> dict:
    """How a wait ended ("met" or "deadline"), after how many pokes, with the last check's result: what the trigger
    sends and what the sensors return as their XCom. One shape whether the condition held at the task's own first
    look or after it deferred (Airflow may also run a deferred task's `execute` again, as a new try)."""
    return {"status": status, "pokes": pokes, **result}


class LagTrigger(BaseTrigger):
    def __init__(self, pipeline: str, check: str, deadline: str, poke_seconds: float = 30):
        super().__init__()
        if check not in CHECKS:
            raise ValueError(f"check must be one of {CHECKS}, got {check!r}")
        self.pipeline, self.check, self.deadline, self.poke_seconds = pipeline, check, deadline, poke_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "pipeline": self.pipeline,
                "check": self.check,
                "deadline": self.deadline,
                "poke_seconds": self.poke_seconds,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = datetime.fromisoformat(self.deadline)
        pokes = 0
        while True:
            pokes += 1
            try:
                result = await asyncio.to_thread(run_check, self.check, self.pipeline)
            except Exception as exc:  # Kafka or Postgres away for a moment: look again, fail only at the deadline
                self.log.warning("%s check of %s failed: %r", self.check, self.pipeline, exc)
                result = {"met": False, "summary": f"check failed: {type(exc).__name__}: {exc}"}
            if result["met"]:
                yield TriggerEvent(outcome("met", pokes, result))
                return
            remaining = (deadline - datetime.now(timezone.utc)).total_seconds()
            if remaining <= 0:
                yield TriggerEvent(outcome("deadline", pokes, result))
                return
            self.log.info("%s of %s not met yet: %s", self.check, self.pipeline, result["summary"])
            await asyncio.sleep(min(self.poke_seconds, remaining))


class RecordsTrigger(BaseEventTrigger):
    def __init__(self, pipeline: str, poke_seconds: float = 10, quiet_seconds: float = 60):
        super().__init__()
        self.pipeline, self.poke_seconds, self.quiet_seconds = pipeline, poke_seconds, quiet_seconds
        self.clock = time.monotonic

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {"pipeline": self.pipeline, "poke_seconds": self.poke_seconds, "quiet_seconds": self.quiet_seconds},
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        woke: float | None = None  # when this trigger last woke the DAG (monotonic)
        while True:
            try:
                result = await asyncio.to_thread(run_check, "wake", self.pipeline)
            except Exception as exc:  # Kafka or Postgres away for a moment, a declaration being edited: look again
                self.log.warning("records check of %s failed: %r", self.pipeline, exc)
                result = {"met": False}
            # The run it woke reads what waits; waking again before it could would only queue runs that find less.
            if result["met"] and (woke is None or self.clock() - woke >= self.quiet_seconds):
                self.log.info("waking %s: %s", self.pipeline, result["summary"])
                woke = self.clock()
                yield TriggerEvent({"pipeline": self.pipeline, **result})
            await asyncio.sleep(self.poke_seconds)
