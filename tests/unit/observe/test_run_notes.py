from datetime import datetime, timezone

from microingest.batches import CommittedBatch
from microingest.observe.run_notes import duration, run_note

T = datetime(2026, 11, 25, tzinfo=timezone.utc)


def batches(n, read, rows, dead, kind="ingest"):
    return [CommittedBatch(f"b{i}", kind, i, (), read, rows, dead, T, T) for i in range(n)]


def note(found=(), seconds=42.0, ingest="success", summary="plan (live): ...", dry_run=False, **kw):
    return run_note(list(found), seconds, ingest_state=ingest, plan_summary=summary, dry_run=dry_run, **kw)


def test_a_committed_run_says_what_it_wrote():
    assert (
        note(batches(3, 50_000, 49_996, 4) + batches(0, 0, 0, 0))
        == "3 batches, 150,000 records, 149,988 rows, 12 dead letters, 42 s"
    )
    assert note(batches(1, 10, 10, 1), seconds=125) == "1 batch, 10 records, 10 rows, 1 dead letter, 2 min 5 s"
    assert note(batches(1, 10, 10, 0, kind="backfill")).startswith("backfill: 1 batch, 10 records")
    assert note(batches(1, 4, 0, 4, kind="skip")) == "skip: 1 batch, 4 records, 0 rows, 4 dead letters, 42 s"
    assert note(batches(1, 10, 10, 0), remaining=90).endswith("; 90 records left to the next run (time budget spent)")


def test_a_redrive_says_what_it_decoded_again_and_what_still_failed():
    assert note(batches(2, 10, 7, 3, kind="redrive"), summary="redrive of 20 dead letter(s)") == (
        "redrive: 2 batches, 20 dead letters decoded again, 14 rows written, 6 still dead letters, 42 s"
    )
    assert note(summary="redrive: no unresolved dead letter is selected (every error class)") == (
        "nothing to redrive: no unresolved dead letter selected"
    )


def test_a_run_that_failed_after_committing_says_both():
    text = note(batches(2, 5, 5, 0), ingest="failed")
    assert text.startswith("2 batches, 10 records") and "then failed" in text


def test_runs_that_wrote_nothing_say_why():
    assert note(ingest="skipped") == "nothing new"
    assert note(ingest="failed") == "failed: nothing committed (see the ingest task's log)"
    assert note(ingest="failed", summary=None).startswith("failed while planning")
    assert note(gate_state="skipped", ingest="skipped", summary=None).startswith("skipped before planning")
    assert (
        note(ingest="skipped", dry_run=True, summary="plan (live): 5 records (dry run: nothing written)")
        == "dry run: plan (live): 5 records"
    )
    assert note(ingest="skipped", summary="plan (backfill): 0 records in at most 0 batch(es)") == "nothing to backfill"


def test_durations_read_as_people_say_them():
    assert [duration(s) for s in (0.4, 59, 60, 3599, 3600, 7322)] == [
        "0 s",
        "59 s",
        "1 min 0 s",
        "59 min 59 s",
        "1 h 0 min",
        "2 h 2 min",
    ]


def test_a_run_that_restarted_a_recreated_topic_says_so_first():
    restart = "topic t was deleted and created again (Kafka topic id a -> b): ..."
    assert (
        note(batches(1, 10, 10, 0), restarts=[restart])
        == f"{restart}; 1 batch, 10 records, 10 rows, 0 dead letters, 42 s"
    )
