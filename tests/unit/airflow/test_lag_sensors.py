"""What the lag sensors do with a trigger's event, and which runs the gate lets through unchecked."""

from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from microingest.airflow.lag_sensors import LagGateSensor, LagSlaSensor
from microingest.declare.validate import parse_pipeline

PIPELINE = parse_pipeline(
    {
        "name": "orders",
        "topic": "orders",
        "target_table": "public.orders",
        "schema": {"order_id": "string"},
        "schedule": "*/15 * * * *",
        "lag": {
            "gate": {"min_records": 100, "max_wait_seconds": 60},
            "sla": {"max_time_lag_seconds": 600, "grace_seconds": 120},
        },
    }
)


def test_the_gate_skips_the_run_when_its_wait_ends_quiet_and_goes_on_when_met():
    gate = LagGateSensor(task_id="wait_for_records", pipeline=PIPELINE)
    with pytest.raises(AirflowSkipException, match="quiet: 3 records wait"):
        gate.execute_complete({}, {"status": "deadline", "pokes": 20, "met": False, "summary": "3 records wait"})
    event = {"status": "met", "pokes": 2, "met": True, "summary": "150 records wait"}
    assert gate.execute_complete({}, event) == event


@pytest.mark.parametrize("sensor", [LagGateSensor, LagSlaSensor])
def test_a_sensor_met_at_its_first_look_returns_what_it_returns_after_deferring(sensor, monkeypatch):
    check = {"met": True, "summary": "150 records wait", "offset_lag": 150}
    monkeypatch.setattr("microingest.airflow.lag_sensors.run_check", lambda *_: dict(check))
    returned = sensor(task_id="wait", pipeline=PIPELINE).execute({"dag_run": SimpleNamespace(run_type="scheduled")})
    assert returned == {"status": "met", "pokes": 1, **check}
    assert sensor(task_id="wait", pipeline=PIPELINE).execute_complete({}, returned) == returned


@pytest.mark.parametrize("run_type", ["manual", "backfill", "asset_triggered"])
def test_runs_someone_asked_for_are_not_gated(run_type):
    gate = LagGateSensor(task_id="wait_for_records", pipeline=PIPELINE)
    assert gate.execute({"dag_run": SimpleNamespace(run_type=run_type)}) is None  # no Kafka, no Postgres touched


def test_the_sla_sensor_fails_when_the_grace_period_ends_unhealthy():
    sla = LagSlaSensor(task_id="sla_orders", pipeline=PIPELINE)
    with pytest.raises(AirflowFailException, match="breached for longer than grace_seconds 120: state STOP"):
        sla.execute_complete({}, {"status": "deadline", "pokes": 4, "met": False, "summary": "state STOP: ..."})
