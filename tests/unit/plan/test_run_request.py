from datetime import datetime, timezone

import pytest

from microingest.batches import RedriveSelection
from microingest.plan.offsets import RequestError
from microingest.plan.request import parse_request

T0, T1 = datetime(2026, 3, 1, tzinfo=timezone.utc), datetime(2026, 3, 2, tzinfo=timezone.utc)
DEFAULTS = {
    "max_records": None,
    "dry_run": False,
    "backfill_ranges": None,
    "backfill_from_time": None,
    "backfill_until_time": None,
    "overlap": "refuse",
}


def test_default_params_ask_for_a_plain_live_run():
    request = parse_request(DEFAULTS, "scheduled")
    assert not request.is_backfill and request.max_records is None and request.describe() == "live run"


def test_offsets_and_a_cap_and_a_dry_run():
    request = parse_request(
        {**DEFAULTS, "backfill_ranges": {"0": [100, 5000], "2": [0, 800]}, "dry_run": True, "overlap": "replace"},
        "manual",
    )
    assert request.offsets == {0: (100, 5000), 2: (0, 800)} and request.dry_run and request.overlap == "replace"
    assert request.is_backfill and "backfill of offsets" in request.describe()


def test_a_time_window_naive_times_are_utc():
    request = parse_request(
        {**DEFAULTS, "backfill_from_time": "2026-03-01T00:00:00", "backfill_until_time": "2026-03-02T00:00:00Z"},
        "manual",
    )
    assert request.window == (T0, T1) and request.field == "backfill_from_time"


def test_an_airflow_backfill_run_replays_its_data_interval_with_the_overlap_from_its_conf():
    request = parse_request({**DEFAULTS, "overlap": "skip_existing"}, "backfill", (T0, T1))
    assert request.window == (T0, T1) and request.overlap == "skip_existing" and request.field == "data_interval"


def test_explicit_ranges_win_over_a_backfill_runs_interval():
    request = parse_request({**DEFAULTS, "backfill_ranges": {"1": [0, 5]}}, "backfill", (T0, T1))
    assert request.offsets == {1: (0, 5)} and request.window is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"backfill_ranges": {"0": [1, 2]}, "backfill_from_time": "2026-03-01T00:00:00"}, "backfill_ranges"),
        ({"backfill_from_time": "2026-03-01T00:00:00"}, "backfill_until_time"),
        ({"backfill_until_time": "2026-03-01T00:00:00"}, "backfill_from_time"),
        (
            {"backfill_from_time": "2026-03-02T00:00:00", "backfill_until_time": "2026-03-01T00:00:00"},
            "backfill_until_time",
        ),
        ({"backfill_from_time": "yesterday", "backfill_until_time": "2026-03-01T00:00:00"}, "backfill_from_time"),
        ({"backfill_ranges": {"x": [1, 2]}}, "backfill_ranges['x']"),
        ({"backfill_ranges": {"0": [1]}}, "backfill_ranges['0']"),
        ({"backfill_ranges": {"0": [-1, 2]}}, "backfill_ranges['0']"),
        ({"backfill_ranges": {}}, "backfill_ranges"),
        ({"overlap": "merge"}, "overlap"),
        ({"max_records": 0}, "max_records"),
        ({"dry_run": "yes"}, "dry_run"),
    ],
)
def test_bad_combinations_name_the_field(change, field):
    with pytest.raises(RequestError) as err:
        parse_request({**DEFAULTS, **change}, "manual")
    assert err.value.field == field


def test_a_backfill_run_without_an_interval_is_refused():
    with pytest.raises(RequestError, match="data interval"):
        parse_request(DEFAULTS, "backfill", (None, None))


def test_a_skip_needs_partition_offset_and_reason_and_nothing_else():
    request = parse_request({"skip_partition": 2, "skip_until_offset": 500, "skip_reason": " broken producer "})
    assert (request.skip.partition, request.skip.until, request.skip.reason) == (2, 500, "broken producer")
    assert not request.is_backfill and "skip of partition 2 to offset 500" in request.describe()
    for params, field in (
        ({"skip_partition": 2, "skip_until_offset": 500}, "skip_reason"),
        ({"skip_partition": 2, "skip_until_offset": 500, "skip_reason": "  "}, "skip_reason"),
        ({"skip_until_offset": 500, "skip_reason": "x"}, "skip_partition"),
        ({"skip_partition": 2, "skip_until_offset": True, "skip_reason": "x"}, "skip_until_offset"),
        ({"skip_partition": 2, "skip_until_offset": 5, "skip_reason": "nul \x00"}, "skip_reason"),
        ({"skip_partition": 2, "skip_until_offset": 5, "skip_reason": "half \ud800"}, "skip_reason"),
        (
            {"skip_partition": 2, "skip_until_offset": 5, "skip_reason": "x", "backfill_ranges": {"2": [0, 5]}},
            "skip_partition",
        ),
    ):
        with pytest.raises(RequestError) as refused:
            parse_request(params)
        assert refused.value.field == field, params


def test_a_redrive_takes_a_class_a_partition_and_offsets_and_a_time():
    request = parse_request(
        {
            **DEFAULTS,
            "redrive": True,
            "redrive_error_class": " wrong_type ",
            "redrive_partition": 2,
            "redrive_from_offset": 10,
            "redrive_until_offset": 20,
            "redrive_since": "2026-03-01T00:00:00",
        }
    )
    assert request.redrive is not None and not request.is_backfill
    assert request.redrive.selection == RedriveSelection("wrong_type", T0)
    assert (request.redrive.partition, request.redrive.offsets) == (2, (10, 20))
    assert request.describe() == (
        "redrive of dead letters of partition 2 offsets [10, 20) (error class wrong_type, written since "
        "2026-03-01T00:00:00+00:00)"
    )
    everything = parse_request({**DEFAULTS, "redrive": True}).redrive
    assert everything is not None and everything.selection == RedriveSelection() and everything.partition is None


@pytest.mark.parametrize(
    "change, field",
    [
        ({"redrive_error_class": "wrong_type"}, "redrive_error_class"),  # without redrive: true
        ({"redrive": "yes"}, "redrive"),
        ({"redrive": True, "redrive_from_offset": 1}, "redrive_until_offset"),  # the one missing
        ({"redrive": True, "redrive_from_offset": 1, "redrive_until_offset": 5}, "redrive_partition"),
        (
            {"redrive": True, "redrive_partition": 0, "redrive_from_offset": 5, "redrive_until_offset": 5},
            "redrive_until_offset",
        ),
        ({"redrive": True, "redrive_partition": -1}, "redrive_partition"),
        ({"redrive": True, "redrive_error_class": " "}, "redrive_error_class"),
        ({"redrive": True, "redrive_since": "yesterday"}, "redrive_since"),
        ({"redrive": True, "backfill_ranges": {"0": [0, 5]}}, "redrive"),
        ({"redrive": True, "skip_partition": 0, "skip_until_offset": 5, "skip_reason": "x"}, "redrive"),
    ],
)
def test_a_redrive_request_that_makes_no_sense_names_its_field(change, field):
    with pytest.raises(RequestError) as caught:
        parse_request({**DEFAULTS, **change})
    assert caught.value.field == field
