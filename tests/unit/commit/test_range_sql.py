from microingest.batches import OffsetRange
from microingest.commit.overlap import _SHOWN, describe, ranges_unnest


def test_ranges_travel_as_four_parallel_arrays_in_range_order():
    fragment, params = ranges_unnest([OffsetRange("a", 2, 10, 20, 10), OffsetRange("b", 0, 0, 5, None)])
    assert fragment.string == "unnest(%s::text[], %s::int[], %s::bigint[], %s::bigint[])"
    assert params == (["a", "b"], [2, 0], [10, 0], [20, 5])


def test_one_parameter_per_placeholder_even_without_ranges():
    fragment, params = ranges_unnest([])
    assert params == ([], [], [], [])
    assert fragment.string.count("%s") == len(params)


def test_overlap_names_each_span_as_a_range_with_its_records_and_counts_the_rest():
    spans = [("t", p, 0, 10, 7) for p in range(_SHOWN + 2)]
    text = describe(spans)
    assert text.startswith("t[0] [0, 10) (7 records), t[1] [0, 10) (7 records), ")
    assert text.endswith(f"t[{_SHOWN - 1}] [0, 10) (7 records) and 2 more ranges")
