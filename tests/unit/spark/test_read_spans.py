"""The positions an executor reports for a chunk: maximal runs of one partition with strictly rising offsets."""

import pyarrow as pa

from microingest.batches import Span
from microingest.spark.decoder import read_spans


def batch(positions):
    topics, partitions, offsets = zip(*positions) if positions else ((), (), ())
    return pa.RecordBatch.from_pydict(
        {
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
        }
    )


def test_one_partition_read_in_order_is_one_span_even_with_gaps():
    assert read_spans(batch([("t", 3, 10), ("t", 3, 11), ("t", 3, 15)])) == [Span("t", 3, 10, 15, 3)]


def test_each_change_of_partition_or_topic_starts_a_span():
    got = read_spans(batch([("t", 0, 5), ("t", 0, 6), ("t", 1, 0), ("u", 1, 1)]))
    assert got == [Span("t", 0, 5, 6, 2), Span("t", 1, 0, 0, 1), Span("u", 1, 1, 1, 1)]


def test_an_offset_that_does_not_rise_starts_a_span_so_the_repeat_overlaps():
    got = read_spans(batch([("t", 0, 5), ("t", 0, 6), ("t", 0, 6), ("t", 0, 7), ("t", 0, 3)]))
    assert got == [Span("t", 0, 5, 6, 2), Span("t", 0, 6, 7, 2), Span("t", 0, 3, 3, 1)]


def test_an_empty_chunk_has_no_spans():
    assert read_spans(batch([])) == []
