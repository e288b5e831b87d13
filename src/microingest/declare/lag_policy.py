"""The `lag:` section of a pipeline declaration: the gate in front of ingest, the lag SLA, the state window.

lag:
  window_seconds: 2700          # optional; default: three schedule periods (see lag.states)
  retention_margin: 6h          # AT_RISK when Kafka's retention deletes unread records sooner (see lag.retention)
  gate:                         # scheduled runs wait (in the triggerer) until there is enough work
    min_records: 10000          # proceed once this many records wait...
    max_wait_seconds: 600       # ...or once the oldest waiting record is this old
    wait_seconds: 300           # give up after this long and skip the run (default: 600)
    poke_seconds: 30            # how often the triggerer looks (default: 30)
  sla:                          # checked by the microingest_lag_sla DAG
    max_time_lag_seconds: 1800  # the oldest waiting record may be at most this old...
    grace_seconds: 900          # ...and the pipeline STALL/STOP/ERR at most this long (default: 900)
    fail_at_risk: true          # ...and never AT_RISK (default: false; AT_RISK needs retention_margin)

Pipelines woken by records (`schedule: on_records`) take their thresholds from the `on_records:` section:

on_records:
  min_records: 1                # wake the DAG once this many records wait...
  max_wait_seconds: 60          # ...or once the oldest waiting record is this old; and at most once this often
  poke_seconds: 10              # how often the triggerer looks

`declare.model` checks the sections as declared; these are what they become.
"""

from __future__ import annotations

from dataclasses import dataclass

from microingest.errors import Refused


class PolicyError(Refused, ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class GatePolicy:
    min_records: int
    max_wait_seconds: int
    wait_seconds: int = 600
    poke_seconds: int = 30


@dataclass(frozen=True)
class SlaPolicy:
    max_time_lag_seconds: int
    grace_seconds: int = 900
    fail_at_risk: bool = False


@dataclass(frozen=True)
class OnRecords:
    """When the triggerer wakes a pipeline's DAG (`schedule: on_records`): a gate, checked all the time."""

    min_records: int = 1
    max_wait_seconds: int = 60
    poke_seconds: int = 10

    def gate(self) -> GatePolicy:
        return GatePolicy(self.min_records, self.max_wait_seconds, poke_seconds=self.poke_seconds)


@dataclass(frozen=True)
class LagPolicy:
    window_seconds: int | None = None
    gate: GatePolicy | None = None
    sla: SlaPolicy | None = None
    retention_margin_seconds: int | None = None

    def declared_gate(self) -> GatePolicy:
        """The gate of a pipeline whose runs have a gate sensor (the DAG factory adds one only when declared)."""
        if self.gate is None:
            raise PolicyError("lag.gate", "is not declared")
        return self.gate

    def declared_sla(self) -> SlaPolicy:
        """The lag SLA of a pipeline the SLA check looks at (only those that declare one)."""
        if self.sla is None:
            raise PolicyError("lag.sla", "is not declared")
        return self.sla
