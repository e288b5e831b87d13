"""One outcome type for a run: what the job reports, what the ingest task returns, what a retry starts from."""

from microingest.batches import CommitResult, JobFailure, OffsetRange, RunOutcome
from microingest.commit.read_proof import ReadMismatchError

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


def test_a_failed_job_reports_why_beside_what_it_committed_and_the_operator_reads_back_the_same():
    outcome = RunOutcome(batches=2, records_read=10, rows_written=9, dead_letters=1, ranges=(A,))
    outcome.failure = JobFailure.of(ReadMismatchError("t[0] read 3..4, planned 3..5"))
    reported = outcome.to_dict()
    assert reported["status"] == "failed"
    assert (reported["error_class"], reported["error"], reported["retryable"]) == (
        "ReadMismatchError",
        "t[0] read 3..4, planned 3..5",
        ReadMismatchError.retryable,
    )
    back = RunOutcome.from_dict(reported)
    assert back.failure == outcome.failure
    assert back.to_dict() == reported  # ranges stay out of the report: the history holds them


def test_a_committed_report_reads_back_without_a_failure():
    outcome = RunOutcome(batches=1, records_read=10, rows_written=9, dead_letters=1, skipped=2, remaining=5)
    assert RunOutcome.from_dict(outcome.to_dict()) == outcome
