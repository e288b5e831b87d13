"""The words of an offset's story for each thing that can become of a record (the facts are read against the real
platform in tests/integration/observe/test_offset_story.py)."""

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from microingest.observe.offset_story import BatchMention, DeadLetterFacts, OffsetFacts, story

T = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)
INGEST = BatchMention("b-1", "ingest", T, "microingest_orders", "scheduled__1")
BASE = OffsetFacts(
    "orders", "append", "public.orders", "orders", 0, 50, earliest=0, latest=100, position=80, mirrored=80
)


@pytest.mark.parametrize(
    "changes, says",
    [
        ({"read_by": [INGEST], "has_row": True}, "a row of public.orders"),
        ({"offset": 150}, "not written yet: the partition's log ends at 100"),
        ({"offset": 90}, "not read yet (the live position is 80)"),
        ({"offset": 90, "earliest": 95}, "lost: retention deleted it before it was read (Kafka holds from 95)"),
        ({"position": None}, "not read yet"),
        ({"offset": 5, "earliest": 10}, "before the pipeline's start, and deleted by retention since"),
        ({"offset": 5}, "before the pipeline's start (start_from latest)"),
        ({"lost_in": [INGEST]}, "lost: retention deleted it before it was read (the gap is recorded"),
        ({"read_by": [INGEST], "in_kafka": False}, "no record there (a transaction marker"),
        (
            {"read_by": [replace(INGEST, filtered=3)]},
            "the transform_sql of batch b-1 filtered 3 of its records out, this one among them unless",
        ),
        ({"read_by": [INGEST]}, "read, but public.orders holds no row for it: it was deleted from the target since"),
        (
            {"read_by": [replace(INGEST, filtered=2)], "sink_mode": "aggregate", "group": {"t": "click"}},
            "the transform_sql of batch b-1 filtered 2 of its records out",
        ),
        ({"read_by": [INGEST], "sink_mode": "upsert_latest", "key_holds": 61}, "superseded: its key's row"),
        ({"read_by": [INGEST], "sink_mode": "aggregate", "group": {"t": "click"}}, "in the group {'t': 'click'}"),
        (
            {"read_by": [INGEST], "dead_letter": DeadLetterFacts("wrong_type", "field 'n' ...", "b-1", T, redrives=2)},
            "a dead letter (wrong_type: field 'n' ...); redriven 2 time(s), still failing",
        ),
        (
            {"read_by": [INGEST], "dead_letter": DeadLetterFacts("skipped", "skipped by me: x", "b-2", T)},
            "skipped, kept as a dead letter: skipped by me: x",
        ),
        (
            {
                "read_by": [INGEST],
                "has_row": True,
                "dead_letter": DeadLetterFacts("wrong_type", "...", "b-1", T, "b-9", T, 1),
            },
            "a dead letter (wrong_type), resolved by redrive batch b-9 at 2026-11-27 12:00:00 UTC: a row of",
        ),
    ],
)
def test_each_fate_is_told(changes, says):
    assert says in story(replace(BASE, **changes))[0]


def test_the_last_line_compares_the_ledger_with_the_mirror_and_kafka():
    assert story(BASE)[-1] == "  partition 0: live position 80, the consumer group mirror agrees; Kafka holds [0, 100)"
    assert "the consumer group mirror says 70 (best effort" in story(replace(BASE, mirrored=70))[-1]
    assert "read by ingest batch b-1, DAG run scheduled__1" in story(replace(BASE, read_by=[INGEST]))[1]
