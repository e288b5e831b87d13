"""The read's proof: spans inside the plan, no position twice, and exactly the records decoded."""

import pytest

from microingest.batches import OffsetRange, Span
from microingest.commit.read_proof import ReadMismatchError, prove_read

RANGES = [OffsetRange("t", 0, 100, 200, 100), OffsetRange("t", 1, 0, 50, 0)]


def test_spans_inside_their_ranges_that_count_every_decoded_record_pass():
    spans = [Span("t", 0, 100, 149, 50), Span("t", 0, 150, 199, 40), Span("t", 1, 0, 49, 50)]
    prove_read(spans, RANGES, 140, "b")


@pytest.mark.parametrize(
    "span",
    [
        Span("t", 0, 99, 120, 10),
        Span("t", 0, 150, 200, 10),
        Span("t", 2, 0, 5, 6),
        Span("u", 0, 100, 110, 11),
        Span("t", 0, 100, 104, 6),
    ],
    ids=["before", "past the end", "unplanned partition", "unplanned topic", "more than offsets"],
)
def test_a_span_outside_the_plan_is_refused(span):
    with pytest.raises(ReadMismatchError, match="outside the planned ranges"):
        prove_read([span], RANGES, span.records, "b")


def test_a_position_read_twice_is_refused_even_in_separate_chunks():
    spans = [Span("t", 0, 100, 149, 50), Span("t", 1, 0, 9, 10), Span("t", 0, 149, 160, 12)]
    with pytest.raises(ReadMismatchError, match="read twice"):
        prove_read(spans, RANGES, 72, "b")


def test_decoded_records_the_spans_do_not_count_are_refused():
    with pytest.raises(ReadMismatchError, match="counted 50 records but 51"):
        prove_read([Span("t", 0, 100, 149, 50)], RANGES, 51, "b")
