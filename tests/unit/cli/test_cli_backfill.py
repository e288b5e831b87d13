"""`microingest backfill` arguments -> the DAG run's Params (no Airflow needed to judge the arguments' shape)."""

import pytest

from microingest.cli.main import UsageError, backfill_conf, build_parser


def conf(*argv):
    return backfill_conf(build_parser().parse_args(["backfill", "orders", *argv]))


def test_offset_ranges_pair_each_partition_with_its_from_and_until():
    assert conf(
        "--partition", "0", "--from", "100", "--until", "5000", "--partition", "2", "--from", "0", "--until", "800"
    ) == {"overlap": "refuse", "dry_run": False, "backfill_ranges": {"0": [100, 5000], "2": [0, 800]}}


def test_a_time_window_gets_explicit_offsets_and_naive_times_are_utc():
    assert conf(
        "--from-time", "2026-11-23T08:00:00Z", "--until-time", "2026-11-23T10:00", "--overlap", "replace", "--dry-run"
    ) == {
        "overlap": "replace",
        "dry_run": True,
        "backfill_from_time": "2026-11-23T08:00:00+00:00",
        "backfill_until_time": "2026-11-23T10:00:00+00:00",
    }


@pytest.mark.parametrize(
    "argv, message",
    [
        ((), "one of the two"),
        (("--partition", "0", "--from", "1", "--until", "2", "--from-time", "2026-01-01"), "one of the two"),
        (("--partition", "0", "--from", "1"), "one --from and one --until for each --partition"),
        (
            ("--partition", "0", "--from", "1", "--until", "2", "--partition", "0", "--from", "3", "--until", "4"),
            "partition 0 given twice",
        ),
        (("--from-time", "2026-01-01T00:00:00Z"), "needs both --from-time and --until-time"),
        (("--from-time", "monday", "--until-time", "tuesday"), "--from-time: not an ISO 8601 time"),
    ],
)
def test_arguments_that_make_no_request_are_usage_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        conf(*argv)
