"""The `lag:` section of a pipeline declaration: the gate in front of ingest, the lag SLA, the state window.

lag:
  window_seconds: 2700          # optional; default: three schedule periods (see lag.states)
  gate:                         # scheduled runs wait (in the triggerer) until there is enough work
    min_records: 10000          # proceed once this many records wait...
    max_wait_seconds: 600       # ...or once the oldest waiting record is this old
    wait_seconds: 300           # give up after this long and skip the run (default: 600)
    poke_seconds: 30            # how often the triggerer looks (default: 30)
  sla:                          # checked by the microingest_lag_sla DAG
    max_time_lag_seconds: 1800  # the oldest waiting record may be at most this old...
    grace_seconds: 900          # ...and the pipeline STALL/STOP/ERR at most this long (default: 900)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


@dataclass(frozen=True)
class LagPolicy:
    window_seconds: int | None = None
    gate: GatePolicy | None = None
    sla: SlaPolicy | None = None

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


def parse_lag_policy(raw: Any) -> LagPolicy:
    section = _mapping(raw, "lag", {"window_seconds", "gate", "sla"})
    window = section.get("window_seconds")
    gate = sla = None
    if section.get("gate") is not None:
        g = _mapping(section["gate"], "lag.gate", {"min_records", "max_wait_seconds", "wait_seconds", "poke_seconds"})
        for key in ("min_records", "max_wait_seconds"):
            if key not in g:
                raise PolicyError(f"lag.gate.{key}", "is required")
        gate = GatePolicy(**{k: _positive(f"lag.gate.{k}", v) for k, v in g.items()})
    if section.get("sla") is not None:
        s = _mapping(section["sla"], "lag.sla", {"max_time_lag_seconds", "grace_seconds"})
        if "max_time_lag_seconds" not in s:
            raise PolicyError("lag.sla.max_time_lag_seconds", "is required")
        sla = SlaPolicy(**{k: _positive(f"lag.sla.{k}", v) for k, v in s.items()})
    return LagPolicy(None if window is None else _positive("lag.window_seconds", window), gate, sla)


def _mapping(raw: Any, where: str, known: set[str]) -> dict:
    if not isinstance(raw, dict):
        raise PolicyError(where, f"must be a mapping, got {type(raw).__name__}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise PolicyError(f"{where}.{unknown[0]}", f"unknown field (known: {', '.join(sorted(known))})")
    return raw


def _positive(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PolicyError(where, f"must be a positive integer, got {value!r}")
    return value
