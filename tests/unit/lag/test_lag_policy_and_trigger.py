"""The `lag:` declaration section, and LagTrigger's serialisation and polling (its check stubbed: the real checks
run against Kafka and Postgres in the integration tests)."""

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from microingest.airflow import lag_triggers as triggers
from microingest.airflow.lag_triggers import LagTrigger, RecordsTrigger
from microingest.declare.lag_policy import GatePolicy, LagPolicy, OnRecords, SlaPolicy
from microingest.declare.pipeline import DeclarationError
from microingest.declare.validate import parse_pipeline
from microingest.lag.status import window_of

BASE = {"name": "orders", "topic": "orders", "target_table": "public.orders", "schema": {"order_id": "string"}}


def test_the_lag_section_with_its_defaults():
    p = parse_pipeline(
        {
            **BASE,
            "schedule": "*/15 * * * *",
            "lag": {"gate": {"min_records": 5000, "max_wait_seconds": 1800}, "sla": {"max_time_lag_seconds": 3600}},
        }
    )
    assert p.lag == LagPolicy(None, GatePolicy(5000, 1800, 600, 30), SlaPolicy(3600, 900))
    assert window_of(p) == timedelta(minutes=60)  # the gate's wait plus two periods beats three periods
    assert parse_pipeline(BASE).lag == LagPolicy()
    assert window_of(parse_pipeline({**BASE, "lag": {"window_seconds": 120}})) == timedelta(seconds=120)


def test_the_trigger_serialises_to_what_rebuilds_it():
    trigger = LagTrigger("orders", "gate", "2026-11-23T12:00:00+00:00", 5)
    path, kwargs = trigger.serialize()
    assert path == "microingest.airflow.lag_triggers.LagTrigger"
    module, _, name = path.rpartition(".")
    rebuilt = getattr(__import__(module, fromlist=[name]), name)(**kwargs)
    assert rebuilt.serialize() == (path, kwargs)


def collect(trigger):
    async def first_event():
        async for event in trigger.run():
            return event.payload

    return asyncio.run(first_event())


def test_the_trigger_fires_when_the_check_is_met_and_keeps_looking_through_failures(monkeypatch):
    answers = iter(
        [
            RuntimeError("broker away"),
            {"met": False, "summary": "12 records wait"},
            {"met": True, "summary": "5,000 records wait"},
        ]
    )

    def check(name, pipeline):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(triggers, "run_check", check)
    deadline = (datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat()
    assert collect(LagTrigger("orders", "gate", deadline, 0.01)) == {
        "status": "met",
        "pokes": 3,
        "met": True,
        "summary": "5,000 records wait",
    }


def test_the_trigger_gives_up_at_its_deadline_with_the_last_answer(monkeypatch):
    monkeypatch.setattr(triggers, "run_check", lambda check, pipeline: {"met": False, "summary": "quiet"})
    deadline = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)
    # The trigger's clock, read once after each answer: before the deadline after the first poke, past it after the
    # second. On the real clock a deadline a moment away may pass before the first answer on a slow machine.
    readings = iter([deadline - timedelta(seconds=1), deadline + timedelta(seconds=1)])

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return next(readings)

    monkeypatch.setattr(triggers, "datetime", Clock)
    event = collect(LagTrigger("orders", "health", deadline.isoformat(), 0.01))
    assert event == {"status": "deadline", "pokes": 2, "met": False, "summary": "quiet"}


def test_a_pipeline_woken_by_records_and_its_thresholds():
    p = parse_pipeline({**BASE, "schedule": "on_records", "on_records": {"min_records": 500, "max_wait_seconds": 600}})
    assert p.woken_by_records and p.on_records == OnRecords(500, 600, 10)
    assert p.on_records.gate() == GatePolicy(500, 600, poke_seconds=10)
    assert window_of(p) == timedelta(minutes=30)  # three max_wait_seconds
    assert window_of(parse_pipeline({**BASE, "schedule": "on_records"})) == timedelta(minutes=15)  # at least 15 min
    assert not parse_pipeline({**BASE, "schedule": "@hourly"}).woken_by_records


def test_the_records_trigger_wakes_when_records_wait_and_not_again_before_its_quiet_time(monkeypatch):
    answers = iter(
        [
            {"met": False, "summary": "no records wait"},
            RuntimeError("broker away"),
            {"met": True, "summary": "3 records wait"},
            {"met": True, "summary": "3 records wait"},  # within the quiet time: the woken run has them
            {"met": False, "summary": "no records wait"},
        ]
        + [{"met": True, "summary": "8 records wait"}] * 10
    )
    checked = []

    def check(name, pipeline):
        checked.append(name)
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(triggers, "run_check", check)
    trigger = RecordsTrigger("orders", poke_seconds=0.001, quiet_seconds=60)
    trigger.clock = lambda: 10.0 * len(checked)  # ten seconds a look
    path, kwargs = trigger.serialize()
    assert path == "microingest.airflow.lag_triggers.RecordsTrigger" and RecordsTrigger(**kwargs).serialize() == (
        path,
        kwargs,
    )

    async def two_events():
        events = []
        async for event in trigger.run():
            events.append((len(checked), event.payload["summary"]))
            if len(events) == 2:
                return events

    (first_at, first), (second_at, second) = asyncio.run(two_events())
    assert (first_at, first, second) == (3, "3 records wait", "8 records wait")
    assert second_at == 9 and set(checked) == {"wake"}  # 60 s after the first wake, the looks between stayed quiet


def test_on_records_and_retention_settings_that_cannot_work_are_refused():
    cases = [
        ({"on_records": {"min_records": 5}}, "on_records", "only applies to schedule: on_records"),
        (
            {"schedule": "on_records", "lag": {"gate": {"min_records": 5, "max_wait_seconds": 60}}},
            "lag.gate",
            "gates scheduled runs",
        ),
        (
            {"lag": {"sla": {"max_time_lag_seconds": 60, "fail_at_risk": True}}},
            "lag.sla.fail_at_risk",
            "needs lag.retention_margin",
        ),
    ]
    for declared, field, problem in cases:
        with pytest.raises(DeclarationError) as err:
            parse_pipeline({**BASE, **declared})
        assert err.value.field == field and problem in err.value.problem
