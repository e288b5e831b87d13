"""Finding the records a SQL statement fails on by halving the batch's positions: every failing record found once,
each with its own message, whatever the slices' shape."""

import random

import pytest

from microingest.batches import Span
from microingest.spark.record_faults import (
    Slice,
    TooManyFaultsError,
    UnplacedFaultError,
    fault_condition,
    faulty_records,
    halves,
    slices_of,
    value_fault,
)


def probe_failing_on(bad: dict[tuple[str, int, int], str], probes: list | None = None):
    def probe(slices):
        if probes is not None:
            probes.append(list(slices))
        hits = sorted(
            k for k in bad if any(k[:2] == (s.topic, s.partition) and s.first <= k[2] <= s.last for s in slices)
        )
        return bad[hits[0]] if hits else None

    return probe


def test_slices_cover_each_partition_from_its_first_span_to_its_last():
    spans = [Span("b", 0, 10, 19, 10), Span("a", 1, 5, 5, 1), Span("b", 0, 0, 9, 10)]
    assert slices_of(spans) == [Slice("a", 1, 5, 5), Slice("b", 0, 0, 19)]


def test_halves_share_the_offsets_out_and_split_a_slice_where_the_cut_falls():
    left, right = halves([Slice("a", 0, 0, 2), Slice("a", 1, 10, 16)])
    assert left == [Slice("a", 0, 0, 2), Slice("a", 1, 10, 11)]
    assert right == [Slice("a", 1, 12, 16)]
    assert halves([Slice("a", 0, 7, 8)]) == ([Slice("a", 0, 7, 7)], [Slice("a", 0, 8, 8)])


@pytest.mark.parametrize("seed", range(20))
def test_every_failing_record_is_found_once_with_its_own_message(seed):
    rng = random.Random(seed)
    slices = [Slice("t", p, rng.randrange(100), 0) for p in range(rng.randint(1, 4))]
    slices = [s._replace(last=s.first + rng.randrange(300)) for s in slices]
    positions = [(s.topic, s.partition, o) for s in slices for o in range(s.first, s.last + 1)]
    bad = {k: f"cannot cast at {k[1]}@{k[2]}" for k in rng.sample(positions, rng.randint(1, 6))}
    whole = probe_failing_on(bad)(slices)
    found = faulty_records(slices, whole, probe_failing_on(bad), limit=10)
    assert sorted((f.topic, f.partition, f.offset) for f in found) == sorted(bad)
    assert all(f.message == bad[(f.topic, f.partition, f.offset)] for f in found)


def test_one_bad_record_in_a_large_batch_takes_about_two_probes_a_halving():
    probes: list = []
    bad = {("t", 0, 77_777): "boom"}
    found = faulty_records([Slice("t", 0, 0, 99_999)], "boom", probe_failing_on(bad, probes), limit=10)
    assert [f.offset for f in found] == [77_777]
    assert len(probes) <= 2 * 17


def test_past_the_limit_the_search_stops_with_what_it_found():
    bad = {("t", 0, o): "boom" for o in range(0, 100, 10)}
    with pytest.raises(TooManyFaultsError) as caught:
        faulty_records([Slice("t", 0, 0, 99)], "boom", probe_failing_on(bad), limit=3)
    assert len(caught.value.found) == 3


def test_a_statement_failing_on_the_whole_but_no_half_is_unplaced():
    with pytest.raises(UnplacedFaultError):
        faulty_records([Slice("t", 0, 0, 9)], "boom", lambda slices: None, limit=3)


class SparkLikeError(Exception):
    """What classic pyspark and Spark Connect errors both offer: the message and getSqlState()."""

    def __init__(self, message: str, state: str | None):
        super().__init__(message)
        self.state = state

    def getSqlState(self):
        return self.state


@pytest.mark.parametrize(
    "message, state, fault",
    [
        (
            "[CAST_INVALID_INPUT] The value 'x' of the type ...\nJVM stacktrace",
            "22018",
            "[CAST_INVALID_INPUT] The value",
        ),
        ("[DIVIDE_BY_ZERO] Division by zero.", "22012", "[DIVIDE_BY_ZERO] Division by zero."),
        ("[USER_RAISED_EXCEPTION] transform_sql gave amount a number that is not finite", "P0001", "[USER_RAISED"),
        ("[KAFKA_DATA_LOSS.START_OFFSET_RESET] Some data may have been lost", "22000", None),
        ("[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column ...", "42703", None),
        ("Connection reset by peer", None, None),
    ],
)
def test_a_value_fault_is_a_data_exception_of_the_records_not_of_kafka_nor_of_the_statement(message, state, fault):
    found = value_fault(SparkLikeError(message, state))
    assert (found is None) if fault is None else found.startswith(fault)


def test_the_condition_of_a_fault_leaves_out_the_value_it_quotes():
    assert fault_condition("[CAST_INVALID_INPUT] The value 'secret' of the type") == "[CAST_INVALID_INPUT]"
    assert fault_condition("something odd happened here") == "something odd happened"
