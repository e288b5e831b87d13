"""Time lag from the record at the ledger position, or interpolated from (observed at, log end) points."""

from datetime import datetime, timedelta, timezone

from microingest.lag.figures import PartitionLag, interpolated_time, time_lag

T0 = datetime(2026, 11, 23, 10, 0, tzinfo=timezone.utc)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def test_offset_lag_counts_from_the_ledger_or_from_the_earliest_offset_when_not_read_yet():
    assert PartitionLag("t", 0, 40, 100, 0).lag == 60
    assert PartitionLag("t", 0, None, 100, 30).lag == 70
    assert PartitionLag("t", 0, 100, 100, 0).lag == 0


def test_the_record_at_the_position_gives_the_time_lag():
    record_ms = int(at(0).timestamp() * 1000)
    assert time_lag(40, 100, at(90), record_ms) == (timedelta(seconds=90), "record")
    assert time_lag(40, 100, at(-5), record_ms) == (timedelta(0), "record")  # producer clock ahead: never negative


def test_no_offset_lag_means_no_time_lag_even_when_the_producer_has_been_idle_for_long():
    points = [(at(0), 100), (at(3600), 100), (at(7200), 100)]
    assert time_lag(100, 100, at(7200), None, points) == (timedelta(0), "")


def test_interpolation_places_an_offset_between_the_observations_that_bracket_it():
    # The log ended at 100 until t=60 (last seen), and at 200 from t=120 (first seen): offsets 100..199 were written
    # in (60s, 120s], evenly: offset 149 at 90s.
    points = [(at(0), 100), (at(60), 100), (at(120), 200), (at(180), 200)]
    assert interpolated_time(149, points) == at(90)
    assert interpolated_time(199, points) == at(120)
    assert time_lag(149, 200, at(300), None, points) == (timedelta(seconds=210), "interpolated")


def test_an_idle_producer_does_not_age_the_records_written_before_it_stopped():
    points = [(at(0), 100), (at(10), 200)] + [(at(s), 200) for s in range(60, 3600, 60)]
    assert interpolated_time(150, points) == at(5.1)  # still the time it was written, not the last observation


def test_offsets_before_the_first_observation_get_a_lower_bound_and_unseen_ones_none():
    points = [(at(50), 300), (at(100), 400)]
    assert interpolated_time(120, points) == at(50)  # written no later than the first time the log was seen past it
    assert interpolated_time(400, points) is None
    assert time_lag(400, 450, at(200), None, points) == (None, "")
