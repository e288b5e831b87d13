"""The next batch of a run read and decoded on a thread of its own while the run commits the one before it.

Reading a batch (`batch.read_batch`) writes nothing anywhere, so it may run beside a commit: the JVM (or the
executors) decode while Postgres takes the rows before. Commits stay the run's own, one at a time and in order. A
batch read ahead is only ever committed after the batch before it; when that one fails, or the run stops, the batch
read ahead is waited for and dropped, nothing of it written, and the next try reads it again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

from microingest.batches import Batch
from microingest.commit.copy_commit import DecodedBatch

log = logging.getLogger(__name__)


class ReadAhead:
    """At most one batch read ahead. Use as a context manager: leaving it drops what was read ahead and not taken."""

    def __init__(
        self,
        read: Callable[[Batch], DecodedBatch],
        on_thread: Callable[[], None] | None = None,
        interrupt: Callable[[], None] | None = None,
    ):
        """`on_thread` runs first on the read-ahead thread (Spark's job tags are the thread's own); `interrupt`, when
        the run fails, ends the read ahead's work early rather than wait for all of it."""
        self._read, self._interrupt = read, interrupt
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="microingest-read-ahead", initializer=on_thread)
        self._ahead: tuple[Batch, Future[DecodedBatch]] | None = None

    def start(self, batch: Batch) -> None:
        """Begin reading `batch` on the read-ahead thread."""
        self.drop("another batch is read ahead")
        self._ahead = (batch, self._pool.submit(self._read, batch))

    def take(self, batch: Batch) -> DecodedBatch:
        """`batch` read and decoded: the batch read ahead when it is this one (its error, if its read failed), else
        read now."""
        if self._ahead is not None and self._ahead[0] == batch:
            _, future = self._ahead
            self._ahead = None
            return future.result()
        self.drop("the run asked for another batch")
        return self._read(batch)

    def drop(self, why: str) -> None:
        """Wait for the batch read ahead, if any, to end, and forget it: nothing of it was written."""
        if self._ahead is None:
            return
        batch, future = self._ahead
        self._ahead = None
        error = future.exception()
        log.info(
            "batch %s read ahead (%s) dropped, nothing of it written: %s%s",
            batch.number,
            ", ".join(map(str, batch.ranges)),
            why,
            f" (its read had failed too: {error})" if error is not None else "",
        )

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if error is not None and self._ahead is not None and self._interrupt is not None:
            self._interrupt()
        self.drop(f"the batch before it failed: {error}" if error is not None else "the run stopped before it")
        self._pool.shutdown(wait=True)
