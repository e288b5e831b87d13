from microingest.batches import OffsetRange


def test_a_range_reads_as_topic_partition_and_half_open_offsets():
    assert str(OffsetRange("demo-events", 3, 100, 250, 100)) == "demo-events[3] [100, 250)"


def test_the_ledger_offset_stays_out_of_the_text():
    # A backfill range (no ledger value) and a live one over the same offsets read alike.
    assert str(OffsetRange("t", 0, 5, 5, None)) == str(OffsetRange("t", 0, 5, 5, 5)) == "t[0] [5, 5)"


def test_a_list_of_ranges_keeps_the_dataclass_repr():
    # Only str() changed: logs that format a list of ranges (repr of each) still show every field.
    assert (
        repr([OffsetRange("t", 0, 1, 2, None)])
        == "[OffsetRange(topic='t', partition=0, from_offset=1, until_offset=2, ledger_offset=None)]"
    )
