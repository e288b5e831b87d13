"""The read-ahead's bookkeeping: a batch read ahead is taken only by the batch it is, its failure is that batch's,
and whatever is left when the run ends or fails is waited for and dropped."""

import logging
import threading

import pytest

from microingest.batches import Batch, OffsetRange
from microingest.spark.read_ahead import ReadAhead


def batch(number: int) -> Batch:
    return Batch("ingest", (OffsetRange("t", 0, number * 10, number * 10 + 10, None),), number)


class Reads:
    """A read that records which thread read which batch, and can be held until released."""

    def __init__(self):
        self.threads: dict[int | None, str] = {}
        self.release = threading.Event()
        self.release.set()

    def __call__(self, b: Batch):
        self.release.wait(timeout=30)
        self.threads[b.number] = threading.current_thread().name
        if b.number == 13:
            raise RuntimeError("the read of 13 failed")
        return f"decoded {b.number}"


def test_the_batch_read_ahead_is_taken_from_the_other_thread_and_another_is_read_here():
    reads = Reads()
    with ReadAhead(reads) as reading:
        reading.start(batch(2))
        assert reading.take(batch(2)) == "decoded 2"
        assert reading.take(batch(3)) == "decoded 3"
    assert reads.threads[2].startswith("microingest-read-ahead")
    assert reads.threads[3] == threading.current_thread().name


def test_asking_for_another_batch_drops_the_one_read_ahead(caplog):
    caplog.set_level(logging.INFO, "microingest.spark.read_ahead")
    reads = Reads()
    with ReadAhead(reads) as reading:
        reading.start(batch(2))
        assert reading.take(batch(5)) == "decoded 5"
    assert "batch 2 read ahead (t[0] [20, 30)) dropped, nothing of it written: the run asked for another" in caplog.text


def test_a_failed_read_ahead_fails_the_batch_that_takes_it():
    with ReadAhead(Reads()) as reading:
        reading.start(batch(13))
        with pytest.raises(RuntimeError, match="the read of 13 failed"):
            reading.take(batch(13))


def test_a_failure_of_the_run_waits_for_the_read_ahead_then_drops_it(caplog):
    caplog.set_level(logging.INFO, "microingest.spark.read_ahead")
    reads = Reads()
    reads.release.clear()
    with pytest.raises(ValueError, match="commit of 1 failed"), ReadAhead(reads) as reading:
        reading.start(batch(2))
        threading.Timer(0.2, reads.release.set).start()
        raise ValueError("commit of 1 failed")
    assert reads.threads[2].startswith("microingest-read-ahead"), "the read had ended before the failure went on"
    assert (
        "batch 2 read ahead (t[0] [20, 30)) dropped, nothing of it written: the batch before it failed" in caplog.text
    )


def test_a_run_that_stops_drops_what_it_read_ahead_and_says_when_that_read_failed_too(caplog):
    caplog.set_level(logging.INFO, "microingest.spark.read_ahead")
    with ReadAhead(Reads()) as reading:
        reading.start(batch(13))
    assert "the run stopped before it (its read had failed too: the read of 13 failed)" in caplog.text


def test_the_thread_is_set_up_first_and_a_failed_run_interrupts_only_what_it_read_ahead():
    seen, interrupted = [], []
    reads = Reads()

    def set_up():
        seen.append(threading.current_thread().name)

    with pytest.raises(ValueError), ReadAhead(reads, set_up, lambda: interrupted.append(1)) as reading:
        reading.start(batch(2))
        assert reading.take(batch(2)) == "decoded 2"
        raise ValueError("nothing read ahead")
    assert seen[0].startswith("microingest-read-ahead") and interrupted == []
    with pytest.raises(ValueError), ReadAhead(reads, None, lambda: interrupted.append(1)) as reading:
        reading.start(batch(3))
        raise ValueError("commit of 2 failed")
    assert interrupted == [1]
