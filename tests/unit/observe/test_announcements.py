from datetime import datetime, timedelta, timezone

import pytest

from microingest.batches import CommittedBatch, OffsetRange
from microingest.observe.announcements import announced_batch_ids, announcement, merged_ranges, unannounced

T0 = datetime(2026, 11, 25, 12, tzinfo=timezone.utc)


def batch(batch_id, ranges, kind="ingest", rows=None, dead=0, at=0):
    read = sum(b - a for _, a, b in ranges)
    return CommittedBatch(
        batch_id,
        kind,
        None,
        tuple(OffsetRange("t", p, a, b, None) for p, a, b in ranges),
        read,
        read - dead if rows is None else rows,
        dead,
        T0,
        T0 + timedelta(seconds=at),
    )


def test_adjacent_ranges_of_one_partition_merge_and_gaps_stay_apart():
    ranges = [
        OffsetRange("t", 1, 100, 150, None),
        OffsetRange("t", 0, 0, 10, None),
        OffsetRange("t", 1, 150, 200, 150),
        OffsetRange("t", 1, 300, 310, None),
        OffsetRange("t", 2, 5, 5, None),
    ]
    assert merged_ranges(ranges) == [
        {"topic": "t", "partition": 0, "from": 0, "until": 10},
        {"topic": "t", "partition": 1, "from": 100, "until": 200},
        {"topic": "t", "partition": 1, "from": 300, "until": 310},
    ]


def test_the_extra_sums_the_batches_and_names_them():
    first, second = batch("b1", [(0, 0, 50), (1, 0, 50)], dead=2, at=1), batch("b2", [(0, 50, 80)], at=5)
    extra = announcement("p", "microingest_p", "manual__1", [first, second])
    assert extra == {
        "pipeline": "p",
        "dag_id": "microingest_p",
        "run_id": "manual__1",
        "kind": "live",
        "batch_ids": ["b1", "b2"],
        "ranges": [
            {"topic": "t", "partition": 0, "from": 0, "until": 80},
            {"topic": "t", "partition": 1, "from": 0, "until": 50},
        ],
        "records_read": 130,
        "rows_written": 128,
        "dead_letters": 2,
        "first_committed_at": (T0 + timedelta(seconds=1)).isoformat(),
        "committed_at": (T0 + timedelta(seconds=5)).isoformat(),
    }
    assert announcement("p", "d", "r", [batch("b3", [(0, 0, 1)], kind="backfill")])["kind"] == "backfill"


def test_batches_named_by_earlier_events_are_not_announced_again():
    batches = [batch("b1", [(0, 0, 1)]), batch("b2", [(0, 1, 2)]), batch("b3", [(0, 2, 3)])]
    announced = announced_batch_ids([{"batch_ids": ["b1"]}, None, {"something": "else"}, {"batch_ids": ["b2"]}])
    assert announced == {"b1", "b2"}
    assert [b.batch_id for b in unannounced(batches, announced)] == ["b3"]


def test_nothing_or_mixed_kinds_is_no_announcement():
    with pytest.raises(ValueError):
        announcement("p", "d", "r", [])
    with pytest.raises(ValueError):
        announcement("p", "d", "r", [batch("a", [(0, 0, 1)]), batch("b", [(0, 1, 2)], kind="backfill")])
