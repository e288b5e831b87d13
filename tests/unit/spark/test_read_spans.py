"""The positions an executor reports for a chunk: maximal runs of one partition with strictly rising offsets."""

from datetime import datetime, timezone

import pyarrow as pa

from microingest.batches import DeadLetterNote, Span
from microingest.declare.validate import parse_pipeline
from microingest.spark.decoder import DECODED_ARROW_SCHEMA, Decoder, collected, read_spans


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


def test_the_spans_and_dead_letter_notes_reach_the_driver_typed_as_they_were_read():
    """The decoder's output as the driver collects it (an Arrow table of DECODED_SCHEMA's layout): the spans and the
    dead letters' notes come back as the executors made them, no text in between."""
    spans = [Span("t", 0, 5, 6, 2), Span("u", 1, 1, 1, 1)]
    notes = [DeadLetterNote("t", 0, 6, "InvalidJson", "line 1:\tnot JSON\n"), DeadLetterNote("u", 1, 1, "x", "")]
    first = {
        "rows": b"",
        "dead": b"",
        "good": 0,
        "bad": 2,
        "spans": [s._asdict() for s in spans],
        "notes": [n._asdict() for n in notes],
    }
    rest = {"rows": b"x", "dead": b"", "good": 0, "bad": 0, "spans": [], "notes": []}
    table = pa.Table.from_batches([pa.RecordBatch.from_pylist([first, rest], schema=DECODED_ARROW_SCHEMA)])
    pipeline = parse_pipeline({"name": "p", "topic": "t", "target_table": "public.p", "schema": {"a": "string"}})
    decoder = Decoder(pipeline, "b", None, into_target=True)
    decoded = collected([table], decoder, datetime.now(timezone.utc))
    assert decoded.spans == spans
    assert decoded.notes == notes
    # as the log shows them: a record's line breaks escaped, so no record can forge a log line
    assert decoded.sample_dead_letters() == ["t[0]@6 InvalidJson: line 1:\\tnot JSON\\n", "u[1]@1 x: "]
