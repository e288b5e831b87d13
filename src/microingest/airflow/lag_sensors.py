"""Lag sensors: the gate in front of a pipeline's runs, and the lag SLA check. Both deferrable: while they wait, the
triggerer polls (microingest.airflow.lag_triggers.LagTrigger) and no worker slot is held.

- LagGateSensor: a scheduled run goes on once enough work waits (`lag.gate`: min_records, or the oldest waiting record
  older than max_wait_seconds); if neither happens within wait_seconds the run ends as skipped, cheaply, and the next
  scheduled run looks again. Batch size follows traffic: small when quiet, full under load. Manual and backfill runs
  are never gated: someone asked for them.
- LagSlaSensor: succeeds while the pipeline is within `lag.sla`; fails (so Airflow's failure callbacks and alerts
  fire) when the time lag exceeds max_time_lag_seconds, or when it stays STALL/STOP/ERR for grace_seconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, NoReturn

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from microingest.airflow.lag_triggers import LagTrigger, outcome, run_check
from microingest.declare.pipeline import Pipeline

GATED_RUN_TYPES = ("scheduled",)


class _LagSensor(BaseSensorOperator):
    check = ""

    def __init__(self, *, pipeline: Pipeline, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", 30)
        super().__init__(**kwargs)
        self.pipeline = pipeline

    def poke(self, context: Any) -> bool:
        return bool(run_check(self.check, self.pipeline.name)["met"])

    def _defer(self, wait_seconds: float, poke_seconds: float) -> NoReturn:
        deadline = datetime.now(timezone.utc) + timedelta(seconds=wait_seconds)
        self.defer(
            trigger=LagTrigger(self.pipeline.name, self.check, deadline.isoformat(), poke_seconds),
            method_name="execute_complete",
            timeout=timedelta(seconds=wait_seconds + 300),
        )


class LagGateSensor(_LagSensor):
    check = "gate"
    ui_color = "#b0e0e6"

    def execute(self, context: Any) -> dict | None:
        run_type = getattr(context["dag_run"].run_type, "value", context["dag_run"].run_type)
        if run_type not in GATED_RUN_TYPES:
            self.log.info("%s run: not gated", run_type)
            return None
        gate = self.pipeline.lag.declared_gate()
        result = run_check(self.check, self.pipeline.name)
        self.log.info("gate: %s", result["summary"])
        if result["met"]:
            return outcome("met", 1, result)
        self.log.info(
            "waiting up to %ss in the triggerer for min_records %s or an oldest record older than %ss",
            gate.wait_seconds,
            gate.min_records,
            gate.max_wait_seconds,
        )
        self._defer(gate.wait_seconds, gate.poke_seconds)

    def execute_complete(self, context: Any, event: dict) -> dict:
        if event["status"] == "met":
            self.log.info("gate open after %s poke(s): %s", event["pokes"], event["summary"])
            return event
        raise AirflowSkipException(f"quiet: {event['summary']}; this run is skipped, the next one looks again")


class LagSlaSensor(_LagSensor):
    check = "health"
    ui_color = "#f0e68c"

    def execute(self, context: Any) -> dict:
        result = run_check(self.check, self.pipeline.name)
        if result["met"]:
            self.log.info("within the lag SLA: %s", result["summary"])
            return outcome("met", 1, result)
        if result.get("breach") in ("time_lag", "retention"):  # waiting would only bring the loss closer
            raise AirflowFailException(f"lag SLA of {self.pipeline.name} breached: {result['summary']}")
        sla = self.pipeline.lag.declared_sla()
        self.log.warning("%s; waiting up to grace_seconds %s for it to recover", result["summary"], sla.grace_seconds)
        interval = self.poke_interval
        self._defer(sla.grace_seconds, getattr(interval, "total_seconds", lambda: interval)())

    def execute_complete(self, context: Any, event: dict) -> dict:
        if event["status"] == "met":
            self.log.info("recovered after %s poke(s): %s", event["pokes"], event["summary"])
            return event
        raise AirflowFailException(
            f"lag SLA of {self.pipeline.name} breached for longer than grace_seconds "
            f"{self.pipeline.lag.declared_sla().grace_seconds}: {event['summary']}"
        )
