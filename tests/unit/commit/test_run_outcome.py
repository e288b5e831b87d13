"""One outcome type for a run: what the job reports, what the ingest task returns, what a retry starts from."""

from microingest.batches import CommitResult, OffsetRange, RunOutcome

A = OffsetRange("t", 0, 0, 10, 0)
B = OffsetRange("t", 1, 5, 8, 5)


def test_a_run_counts_its_batches_and_what_earlier_tries_committed():
    earlier = RunOutcome()
    earlier.add(CommitResult("b1", rows_written=9, records_read=10, dead_letters=1, ranges=(A,)))
    outcome = RunOutcome()
    outcome.extend(earlier)
    outcome.add(CommitResult("b2", rows_written=2, records_read=3, dead_letters=0, ranges=(B,), skipped=1))
    assert (outcome.batches, outcome.records_read, outcome.rows_written, outcome.dead_letters, outcome.skipped) == (
        2,
        13,
        11,
        1,
        1,
    )
    assert outcome.ranges == (A, B)


def test_the_reported_outcome_is_the_counts_without_the_ranges():
    outcome = RunOutcome(batches=1, records_read=10, rows_written=9, dead_letters=1, remaining=5, ranges=(A,))
    assert outcome.to_dict() == {
        "status": "committed",
        "batches": 1,
        "records_read": 10,
        "rows_written": 9,
        "dead_letters": 1,
        "skipped": 0,
        "remaining": 5,
    }
