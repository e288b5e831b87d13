import json
import re
from datetime import datetime, timezone

import pytest

from microingest.batches import OffsetRange, Positions, RedriveSelection, RunPlan
from microingest.errors import PlanningError
from microingest.plan.offsets import RequestError, backfill_ranges, skip_range


def spans(ranges):
    return [(r.partition, r.from_offset, r.until_offset, r.ledger_offset) for r in ranges]


def drain(plan):
    batches = []
    while plan.ranges:
        batch, plan = plan.next_batch()
        batches.append(batch.ranges)
    return batches


def test_a_live_run_is_cut_into_capped_batches_that_each_expect_the_ledger_the_previous_one_left():
    plan = RunPlan("ingest", (OffsetRange("t", 0, 0, 25, None), OffsetRange("t", 1, 10, 15, 10)), batch_cap=10)
    assert plan.batches_needed == 3
    batches = drain(plan)
    assert [spans(b) for b in batches] == [
        [(0, 0, 5, None), (1, 10, 15, 10)],
        [(0, 5, 15, 5)],
        [(0, 15, 25, 15)],
    ]


@pytest.mark.parametrize("cap", [1, 3, 7, 10, 64, 1000])
def test_batches_cover_the_run_exactly_once_and_respect_the_cap(cap):
    plan = RunPlan(
        "ingest",
        (OffsetRange("t", 0, 3, 40, 3), OffsetRange("t", 1, 0, 2, None), OffsetRange("t", 2, 100, 163, 90)),
        batch_cap=cap,
    )
    seen = []
    ledger = {0: 3, 1: None, 2: 90}
    for batch in drain(plan):
        assert sum(r.size for r in batch) <= cap
        for r in batch:
            assert r.ledger_offset == ledger[r.partition], "each batch fences on where the previous one ended"
            ledger[r.partition] = r.until_offset
            seen += [(r.partition, o) for o in range(r.from_offset, r.until_offset)]
    assert sorted(seen) == [(0, o) for o in range(3, 40)] + [(1, 0), (1, 1)] + [(2, o) for o in range(100, 163)]


def test_a_retention_gap_stays_on_the_first_batch_only():
    plan = RunPlan("ingest", (OffsetRange("t", 0, 20, 40, 5),), batch_cap=10)
    first, second = drain(plan)
    assert first[0].gap == (5, 20) and second[0].gap is None


def test_backfill_batches_carry_no_ledger_value():
    plan = RunPlan("backfill", (OffsetRange("t", 0, 0, 30, None),), batch_cap=10, overlap="replace")
    batches = drain(plan)
    assert [spans(b) for b in batches] == [[(0, 0, 10, None)], [(0, 10, 20, None)], [(0, 20, 30, None)]]


def test_a_resumed_run_skips_what_it_committed_and_expects_the_ledger_there():
    plan = RunPlan("ingest", (OffsetRange("t", 0, 0, 25, None), OffsetRange("t", 1, 10, 15, 10)), batch_cap=10)
    committed = [OffsetRange("t", 0, 0, 5, None), OffsetRange("t", 1, 10, 15, 10), OffsetRange("t", 0, 5, 15, 5)]
    rest = plan.without(committed)
    assert spans(rest.ranges) == [(0, 15, 25, 15)]
    assert plan.without(committed + [OffsetRange("t", 0, 15, 25, 15)]).ranges == ()
    assert plan.without([]) == plan


def test_a_history_with_a_hole_in_a_run_is_reported():
    plan = RunPlan("ingest", (OffsetRange("t", 0, 0, 25, None),), batch_cap=10)
    with pytest.raises(PlanningError, match="inconsistent"):
        plan.without([OffsetRange("t", 0, 5, 15, 5)])


def test_run_plan_round_trips_through_its_xcom_form():
    plan = RunPlan("backfill", (OffsetRange("t", 2, 5, 9, None),), 100, None, "skip_existing")
    assert RunPlan.from_dict(plan.to_dict()) == plan
    assert plan.to_dict()["records"] == 4
    by_time = RunPlan("backfill", plan.ranges, 100, None, "refuse", (1_700_000_000_000, 1_700_000_060_000))
    assert RunPlan.from_dict(json.loads(json.dumps(by_time.to_dict()))) == by_time
    skip = RunPlan("skip", (OffsetRange("t", 0, 5, 9, 5),), 4, topic_ids={"t": "id-1"}, note="skipped by me: broken")
    assert RunPlan.from_dict(json.loads(json.dumps(skip.to_dict()))) == skip
    since = datetime(2026, 11, 1, tzinfo=timezone.utc)
    redrive = RunPlan("redrive", plan.ranges, 50, note="redriven by me", redrive=RedriveSelection("wrong_type", since))
    assert RunPlan.from_dict(json.loads(json.dumps(redrive.to_dict()))) == redrive


def test_a_plan_made_before_several_topics_keeps_its_topic_id_fence():
    old = {"kind": "ingest", "ranges": [OffsetRange("t", 0, 5, 9, 5).to_dict()], "batch_cap": 10, "topic_id": "id-1"}
    assert RunPlan.from_dict(old).topic_ids == {"t": "id-1"}
    assert RunPlan.from_dict({**old, "topic_id": None}).topic_ids == {}


def test_run_plan_rejects_unknown_kinds_and_bad_caps():
    with pytest.raises(PlanningError):
        RunPlan("sideways", (), 10)
    with pytest.raises(PlanningError):
        RunPlan("ingest", (), 0)


EARLIEST, LATEST, LEDGER = {0: 10, 1: 0, 2: 0}, {0: 5000, 1: 900, 2: 800}, {0: 4000, 1: 900, 2: 800}


def test_backfill_ranges_below_the_live_position_are_taken_as_asked():
    ranges, notes = backfill_ranges(
        "t", {0: (100, 3000), 2: (0, 800)}, Positions(LEDGER, EARLIEST, LATEST), "backfill_ranges"
    )
    assert spans(ranges) == [(0, 100, 3000, None), (2, 0, 800, None)] and notes == []


@pytest.mark.parametrize(
    "requested, field, message",
    [
        ({7: (0, 10)}, "backfill_ranges['7']", "partition 7 does not exist in topic t (partitions: 0, 1, 2)"),
        ({1: (50, 10)}, "backfill_ranges['1']", "from 50 is greater than until 10"),
        ({1: (0, 901)}, "backfill_ranges['1']", "beyond the log end of t[1] (latest offset 900)"),
        ({0: (3, 100)}, "backfill_ranges['0']", "below the earliest offset t[0] still retains (10)"),
        ({0: (100, 4500)}, "backfill_ranges['0']", "above the live position 4000 of t[0]"),
    ],
)
def test_backfill_ranges_kafka_or_the_ledger_cannot_honour_fail_naming_field_and_partition(requested, field, message):
    with pytest.raises(RequestError) as err:
        backfill_ranges("t", requested, Positions(LEDGER, EARLIEST, LATEST), "backfill_ranges")
    assert err.value.field == field and message in str(err.value)


def test_a_partition_the_live_pipeline_has_not_started_cannot_be_backfilled_by_offsets():
    with pytest.raises(RequestError, match="has not started t\\[1\\]"):
        backfill_ranges("t", {1: (0, 10)}, Positions({0: 4000}, EARLIEST, LATEST), "backfill_ranges")


def test_a_time_window_is_cut_at_the_live_position_and_leaves_unstarted_partitions_alone():
    ranges, notes = backfill_ranges(
        "t",
        {0: (3500, 5000), 1: (0, 900), 2: (10, 20)},
        Positions({0: 4000, 2: 5}, EARLIEST, LATEST),
        "backfill_from_time",
        clip_to_live=True,
    )
    assert spans(ranges) == [(0, 3500, 4000, None)]
    assert any("t[0]: [4000, 5000)" in n for n in notes)
    assert any("t[1]: no live position" in n for n in notes)
    assert any("t[2]: [10, 20) is at or above the live position 5" in n for n in notes)


def test_each_batch_carries_how_its_plan_wants_it_committed():
    window = (1_700_000_000_000, 1_700_000_060_000)
    plan = RunPlan("backfill", (OffsetRange("t", 0, 0, 25, None),), 10, None, "replace", window)
    first, rest = plan.next_batch(3)
    second, _ = rest.next_batch(4)
    assert (first.kind, first.is_backfill, first.overlap, first.time_window_ms, first.number) == (
        "backfill",
        True,
        "replace",
        window,
        3,
    )
    assert second.number == 4 and spans(second.ranges) == [(0, 10, 20, None)]
    live, _ = RunPlan("ingest", (OffsetRange("t", 0, 0, 5, 0),), 10).next_batch()
    assert (live.kind, live.is_backfill, live.number) == ("ingest", False, None)


def test_a_skip_split_in_batches_fences_each_on_the_ledger_and_carries_its_note():
    plan = RunPlan("skip", (OffsetRange("t", 0, 20, 40, 5),), 10, note="skipped by me: broken")
    first, rest = plan.next_batch(1)
    second, _ = rest.next_batch(2)
    assert (first.kind, first.is_skip, first.is_backfill, first.note) == ("skip", True, False, "skipped by me: broken")
    assert spans(first.ranges) == [(0, 20, 30, 5)] and spans(second.ranges) == [(0, 30, 40, 30)]
    assert second.note == first.note


def test_a_skip_runs_from_the_live_position_to_until():
    positions = Positions({0: 40, 1: 7}, {0: 0, 1: 0, 2: 3}, {0: 100, 1: 7, 2: 50})
    assert spans([skip_range("t", 0, 60, positions, "earliest")]) == [(0, 40, 60, 40)]
    # A partition never read starts where the pipeline would: its earliest offset.
    assert spans([skip_range("t", 2, 10, positions, "latest")]) == [(2, 3, 10, None)]
    # Offsets retention deleted are a gap, not records to keep.
    gone = Positions({0: 40}, {0: 55}, {0: 100})
    assert skip_range("t", 0, 60, gone, "earliest").gap == (40, 55)


@pytest.mark.parametrize(
    "partition,until,positions,start_from,field,message",
    [
        (5, 10, Positions({0: 4}, {0: 0}, {0: 9}), "earliest", "partition", "partition 5 does not exist in topic t"),
        (0, 4, Positions({0: 4}, {0: 0}, {0: 9}), "earliest", "until", "until 4 is not beyond the live position 4"),
        (0, 10, Positions({0: 4}, {0: 0}, {0: 9}), "earliest", "until", "beyond the log end of t[0] (latest offset 9)"),
        (0, 5, Positions({}, {0: 0}, {0: 9}), "latest", "partition", "no live position yet: with start_from latest"),
    ],
)
def test_a_skip_kafka_or_the_ledger_cannot_honour_names_the_field(
    partition, until, positions, start_from, field, message
):
    with pytest.raises(RequestError, match=re.escape(message)) as refused:
        skip_range("t", partition, until, positions, start_from)
    assert refused.value.field == field
