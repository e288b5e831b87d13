"""What the gate and SLA checks record: the partitions they saw caught up, so that the STOP rule counts a quiet
topic's idleness from there (Kafka, Postgres and the status stubbed; the SQL runs in
tests/integration/lag/test_lag.py)."""

from contextlib import contextmanager, nullcontext
from datetime import datetime, timedelta, timezone

import pytest

from microingest.declare.lag_policy import GatePolicy, SlaPolicy
from microingest.declare.validate import parse_pipeline
from microingest.lag import checks, status
from microingest.lag.figures import PartitionLag
from microingest.lag.states import LagState, Verdict
from microingest.systems import postgres
from microingest.systems.pipeline_systems import PipelineSystems

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
PIPELINE = parse_pipeline(
    {"name": "orders", "topic": "orders", "target_table": "public.orders", "schema": {"order_id": "string"}}
)
LAGS = [
    PartitionLag("orders", 0, 500, 500, 0),  # caught up
    PartitionLag("orders", 1, 200, 900, 0),  # 700 records wait
    PartitionLag("orders", 2, None, 0, 0),
]  # not started, nothing ever written: caught up too


@pytest.fixture
def recorded(monkeypatch):
    """The observations the checks record, as (pipeline, positions, log ends, source, at)."""
    rows = []

    def record(conn, pipeline, ledger, ends, source, at=None):
        rows.append((pipeline, ledger, ends, source, at))

    monkeypatch.setattr(PipelineSystems, "of", classmethod(lambda cls, pipeline: cls(None, None)))
    # A connection used as `with systems.db() as conn, conn:` (a transaction).
    monkeypatch.setattr(PipelineSystems, "db", lambda self: nullcontext(nullcontext()))
    monkeypatch.setattr(checks.lag_history, "record", record)
    return rows


def stub_status(monkeypatch, lags, state=LagState.OK):
    partitions = [(lag, Verdict(state, "")) for lag in lags]
    monkeypatch.setattr(
        checks,
        "pipeline_status",
        lambda pipeline, now, systems: status.PipelineStatus(
            pipeline.name, pipeline.sources_named, Verdict(state, "why"), timedelta(minutes=30), NOW, partitions
        ),
    )


def test_a_gate_poke_records_the_partitions_it_saw_caught_up(monkeypatch, recorded):
    monkeypatch.setattr(checks, "partition_lags", lambda pipeline, systems, now, fetch_records: LAGS)
    assert checks.gate_check(PIPELINE, GatePolicy(min_records=100, max_wait_seconds=60), NOW).met
    assert recorded == [
        ("orders", {("orders", 0): 500, ("orders", 2): None}, {("orders", 0): 500, ("orders", 2): 0}, "gate", NOW)
    ]


def test_an_sla_poke_records_the_partitions_it_saw_caught_up(monkeypatch, recorded):
    stub_status(monkeypatch, LAGS)
    assert checks.health_check(PIPELINE, SlaPolicy(max_time_lag_seconds=600), NOW).met
    assert recorded == [
        ("orders", {("orders", 0): 500, ("orders", 2): None}, {("orders", 0): 500, ("orders", 2): 0}, "sla", NOW)
    ]


def test_partitions_with_records_waiting_are_not_recorded(monkeypatch, recorded):
    # Between runs a poke sees the last run's position: recorded, a row of those would read as STALL.
    stub_status(monkeypatch, [LAGS[1]], LagState.STOP)
    check = checks.health_check(PIPELINE, SlaPolicy(max_time_lag_seconds=600), NOW)
    assert (check.met, check.breach, recorded) == (False, "state", [])


def test_a_check_answers_when_postgres_refuses_the_record(monkeypatch, recorded):
    @contextmanager
    def unreachable(self):
        raise postgres.PostgresUnavailableError("Postgres at db:5432/x is unreachable")
        yield

    monkeypatch.setattr(PipelineSystems, "db", unreachable)
    stub_status(monkeypatch, LAGS)
    assert checks.health_check(PIPELINE, SlaPolicy(max_time_lag_seconds=600), NOW).met
    assert recorded == []
