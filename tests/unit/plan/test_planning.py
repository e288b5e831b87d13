import pytest

from microingest.batches import OffsetRange, Positions
from microingest.errors import PlanningError
from microingest.plan.offsets import RetentionGapError, plan_ranges


def ranges(plan):
    return [(r.partition, r.from_offset, r.until_offset, r.ledger_offset) for r in plan.ranges]


def test_new_pipeline_starts_at_earliest_and_takes_everything_under_the_cap():
    plan = plan_ranges({"t": Positions({}, {0: 5, 1: 0}, {0: 10, 1: 3})}, max_records=100)
    assert ranges(plan) == [(0, 5, 10, None), (1, 0, 3, None)]
    assert plan.total_records == 8 and plan.pins == ()


def test_continues_from_the_ledger():
    plan = plan_ranges({"t": Positions({0: 7, 1: 3}, {0: 0, 1: 0}, {0: 10, 1: 3})}, max_records=100)
    assert ranges(plan) == [(0, 7, 10, 7)]


def test_nothing_new_plans_nothing():
    plan = plan_ranges({"t": Positions({0: 10, 1: 3}, {0: 0, 1: 0}, {0: 10, 1: 3})}, max_records=100)
    assert plan.ranges == () and plan.total_records == 0


def test_empty_topic_plans_nothing():
    assert plan_ranges({"t": Positions({}, {0: 0, 1: 0, 2: 0}, {0: 0, 1: 0, 2: 0})}, max_records=10).ranges == ()


def test_cap_is_shared_fairly_and_never_exceeded():
    plan = plan_ranges({"t": Positions({}, {0: 0, 1: 0, 2: 0}, {0: 2, 1: 100, 2: 100})}, max_records=50)
    assert ranges(plan) == [(0, 0, 2, None), (1, 0, 24, None), (2, 0, 24, None)]
    assert plan.total_records == 50


@pytest.mark.parametrize("cap", [1, 2, 3, 7, 299, 300, 301])
def test_cap_holds_for_any_size_and_ranges_are_contiguous(cap):
    latest = {0: 100, 1: 100, 2: 100}
    plan = plan_ranges({"t": Positions({0: 0, 1: 0, 2: 0}, {0: 0, 1: 0, 2: 0}, latest)}, max_records=cap)
    assert plan.total_records == min(cap, 300)
    for r in plan.ranges:
        assert 0 == r.from_offset < r.until_offset <= latest[r.partition]


def test_repeated_capped_batches_cover_every_offset_exactly_once():
    earliest, latest = {0: 0, 1: 10, 2: 0}, {0: 37, 1: 12, 2: 101}
    ledger, seen = {}, []
    while True:
        plan = plan_ranges({"t": Positions(ledger, earliest, latest)}, max_records=16)
        if not plan.ranges:
            break
        assert plan.total_records <= 16
        for r in plan.ranges:
            assert r.ledger_offset == ledger.get(r.partition)
            seen += [(r.partition, o) for o in range(r.from_offset, r.until_offset)]
            ledger[r.partition] = r.until_offset
    expected = [(p, o) for p in latest for o in range(earliest[p], latest[p])]
    assert sorted(seen) == sorted(expected)


def test_new_partition_is_discovered_and_starts_at_earliest():
    plan = plan_ranges({"t": Positions({0: 10}, {0: 0, 1: 4}, {0: 10, 1: 6})}, max_records=100)
    assert ranges(plan) == [(1, 4, 6, None)]


def test_a_new_pipeline_with_start_from_latest_pins_its_partitions_at_their_end():
    plan = plan_ranges({"t": Positions({}, {0: 0, 1: 0}, {0: 5, 1: 9})}, max_records=100, start_from="latest")
    assert ranges(plan) == []
    assert [(r.partition, r.from_offset, r.until_offset) for r in plan.pins] == [(0, 5, 5), (1, 9, 9)]


def test_a_partition_added_after_a_latest_pipeline_started_is_read_from_its_earliest_offset():
    """Everything in it was written after the pipeline started: pinning it at its end would drop those records."""
    plan = plan_ranges({"t": Positions({0: 3}, {0: 0, 1: 0}, {0: 5, 1: 9})}, max_records=100, start_from="latest")
    assert ranges(plan) == [(0, 3, 5, 3), (1, 0, 9, None)]
    assert plan.pins == ()


def test_retention_gap_names_topic_partition_and_missing_range():
    with pytest.raises(RetentionGapError, match=r"t\[1\].*\[5, 20\)"):
        plan_ranges({"t": Positions({0: 0, 1: 5}, {0: 0, 1: 20}, {0: 1, 1: 30})}, max_records=10)


def test_ledger_beyond_latest_is_an_error():
    with pytest.raises(PlanningError, match="beyond the latest"):
        plan_ranges({"t": Positions({0: 50}, {0: 0}, {0: 10})}, max_records=10)


@pytest.mark.parametrize("cap", [0, -1])
def test_rejects_non_positive_cap(cap):
    with pytest.raises(PlanningError):
        plan_ranges({"t": Positions({}, {0: 0}, {0: 1})}, max_records=cap)


def test_offset_range_round_trips_through_dict():
    r = OffsetRange("t", 2, 5, 9, None)
    assert OffsetRange.from_dict(r.to_dict()) == r
    assert r.size == 4


def test_retention_gap_can_be_skipped_and_the_range_remembers_the_gap():
    plan = plan_ranges({"t": Positions({0: 5}, {0: 20}, {0: 30})}, max_records=100, on_retention_gap="skip")
    [r] = plan.ranges
    assert (r.from_offset, r.until_offset, r.ledger_offset, r.gap) == (20, 30, 5, (5, 20))


def test_a_gap_with_nothing_left_after_it_is_a_pin_that_records_the_gap():
    """Retention deleted every record past the position: nothing to read, but the position moves past the gap now
    (and the gap is recorded) instead of counting deleted records as waiting until a new one arrives."""
    plan = plan_ranges(
        {"t": Positions({0: 5, 1: 3}, {0: 20, 1: 0}, {0: 20, 1: 9})}, max_records=100, on_retention_gap="skip"
    )
    [pin] = plan.pins
    assert (pin.partition, pin.from_offset, pin.until_offset, pin.gap) == (0, 20, 20, (5, 20))
    assert [(r.partition, r.from_offset) for r in plan.ranges] == [(1, 3)]
    with pytest.raises(RetentionGapError):
        plan_ranges({"t": Positions({0: 5}, {0: 20}, {0: 20})}, max_records=100)


def test_ranges_without_a_gap_report_none():
    plan = plan_ranges({"t": Positions({0: 5}, {0: 0}, {0: 30})}, max_records=100, on_retention_gap="skip")
    assert plan.ranges[0].gap is None


def test_the_cap_is_shared_over_every_partition_of_every_topic():
    plan = plan_ranges(
        {"eu": Positions({0: 0}, {0: 0}, {0: 5}), "us": Positions({0: 0, 1: 0}, {0: 0, 1: 0}, {0: 100, 1: 100})},
        max_records=45,
    )
    assert [(r.topic, r.partition, r.from_offset, r.until_offset) for r in plan.ranges] == [
        ("eu", 0, 0, 5),  # the small claim in full
        ("us", 0, 0, 20),
        ("us", 1, 0, 20),
    ]


def test_capped_batches_over_two_topics_cover_every_offset_of_each_exactly_once():
    earliest = {"eu": {0: 0, 1: 3}, "us": {0: 0}}
    latest = {"eu": {0: 41, 1: 9}, "us": {0: 77}}
    ledgers: dict[str, dict[int, int]] = {"eu": {}, "us": {}}
    seen = []
    while True:
        plan = plan_ranges({t: Positions(ledgers[t], earliest[t], latest[t]) for t in latest}, max_records=13)
        if not plan.ranges:
            break
        assert plan.total_records <= 13
        for r in plan.ranges:
            assert r.ledger_offset == ledgers[r.topic].get(r.partition)
            seen += [(r.topic, r.partition, o) for o in range(r.from_offset, r.until_offset)]
            ledgers[r.topic][r.partition] = r.until_offset
    expected = [(t, p, o) for t in latest for p in latest[t] for o in range(earliest[t][p], latest[t][p])]
    assert sorted(seen) == sorted(expected)
    assert len(seen) == len(set(seen))


JOINING = {
    "known": Positions({0: 4}, {0: 0, 1: 0}, {0: 4, 1: 6}),  # partition 1 added after the pipeline started
    "joined": Positions({}, {0: 2, 1: 0}, {0: 9, 1: 3}),  # a topic without positions yet
}


def test_a_topic_added_by_hand_to_a_latest_pipeline_starts_at_its_end_a_new_partition_of_a_known_one_does_not():
    plan = plan_ranges(JOINING, max_records=100, start_from="latest")
    assert [(r.topic, r.partition, r.from_offset) for r in plan.pins] == [("joined", 0, 9), ("joined", 1, 3)]
    assert [(r.topic, r.partition, r.from_offset, r.until_offset) for r in plan.ranges] == [("known", 1, 0, 6)]


def test_a_topic_that_comes_to_match_a_latest_pipelines_pattern_is_read_from_its_earliest_offset():
    plan = plan_ranges(JOINING, max_records=100, start_from="latest", joined_from="earliest")
    assert plan.pins == ()
    assert [(r.topic, r.partition, r.from_offset, r.until_offset) for r in plan.ranges] == [
        ("joined", 0, 2, 9),
        ("joined", 1, 0, 3),
        ("known", 1, 0, 6),
    ]


def test_a_retention_gap_names_the_topic_it_is_on():
    with pytest.raises(RetentionGapError, match=r"retention gap on us\[0\]"):
        plan_ranges({"eu": Positions({0: 0}, {0: 0}, {0: 3}), "us": Positions({0: 1}, {0: 5}, {0: 9})}, max_records=9)
