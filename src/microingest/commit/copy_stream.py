"""COPY FROM STDIN fed while the rows are still being produced.

Buffering a Spark partition's rows before its COPY starts serialises the two halves of staging: Python decodes while
Postgres waits, then Postgres parses and inserts while Python waits. Here the COPY runs in a thread of its own
(psycopg2 releases the GIL while libpq sends), fed through a bounded queue of chunks: the two overlap, and memory
stays at a few chunks however large the partition.
"""

from __future__ import annotations

import queue
import threading
from typing import Callable, Sequence, TypeVar

from psycopg2 import sql

from microingest.declare.identifiers import identifier_list

T = TypeVar("T")
CHUNK_CHARS = 1 << 20
QUEUED_CHUNKS = 4
_END = object()


class CopyAborted(RuntimeError):
    """Raised inside the COPY's read when the producer failed: Postgres ends the COPY with an error."""


class RowWriter:
    """The producer's end: `write` COPY data (all str or all bytes); full chunks go to the COPY thread, waiting while
    the queue is full."""

    def __init__(self, chunks: "queue.Queue", copying: threading.Thread):
        self._chunks, self._copying = chunks, copying
        self._parts: list[str | bytes] = []
        self._size = 0

    def write(self, data: str | bytes) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size >= CHUNK_CHARS:
            self.flush()

    def flush(self) -> None:
        if self._parts:
            self._put(self._parts[0][:0].join(self._parts))
            self._parts, self._size = [], 0

    def close(self) -> None:
        """Everything is written: the COPY ends once it has sent the last chunk."""
        self.flush()
        self._put(_END)

    def _put(self, item) -> None:
        while True:
            try:
                self._chunks.put(item, timeout=0.5)
                return
            except queue.Full:
                if not self._copying.is_alive():  # the COPY failed: its error is raised by copy_while_producing
                    raise CopyAborted("the COPY ended early") from None


class _ChunkReader:
    """The COPY's end: a file-like object psycopg2's copy_expert reads until it returns ''."""

    def __init__(self, chunks: "queue.Queue"):
        self._chunks = chunks

    def read(self, size: int = -1) -> str | bytes:
        item = self._chunks.get()
        if item is _END:
            return b""
        if isinstance(item, BaseException):
            raise CopyAborted(f"the rows' producer failed: {type(item).__name__}: {item}")
        return item


def copy_statement(cur, table: sql.Identifier, columns: Sequence[str], csv: bool = False) -> str:
    cols = identifier_list(columns)
    options = sql.SQL(" (FORMAT csv)" if csv else "")
    return sql.SQL("COPY {} ({}) FROM STDIN{}").format(table, cols, options).as_string(cur)


def copy_while_producing(cur, table: sql.Identifier, columns: Sequence[str], produce: Callable[[RowWriter], T],
                         csv: bool = False) -> T:
    """COPY into `table` the rows `produce` writes (COPY text lines, or CSV) while it writes them; returns what it
    returns.

    Either everything `produce` wrote is copied, or this raises (the producer's exception first) and the COPY, with
    the transaction around it, has failed."""
    statement = copy_statement(cur, table, columns, csv)
    chunks: queue.Queue = queue.Queue(maxsize=QUEUED_CHUNKS)
    failure: list[BaseException] = []

    def copy() -> None:
        try:
            cur.copy_expert(statement, _ChunkReader(chunks), size=CHUNK_CHARS)
        except BaseException as exc:  # handed to the producer's thread, which raises it
            failure.append(exc)

    copying = threading.Thread(target=copy, name="copy-while-producing", daemon=True)
    copying.start()
    writer = RowWriter(chunks, copying)
    try:
        result = produce(writer)
        writer.close()
    except BaseException as exc:
        if copying.is_alive():
            _hand_over(chunks, exc, copying)
        copying.join()
        if failure and isinstance(exc, CopyAborted):
            raise failure[0] from None
        raise
    copying.join()
    if failure:
        raise failure[0]
    return result


def _hand_over(chunks: "queue.Queue", exc: BaseException, copying: threading.Thread) -> None:
    """Make the COPY thread's next read raise: drop queued chunks until the exception fits in the queue."""
    while copying.is_alive():
        try:
            chunks.put_nowait(exc)
            return
        except queue.Full:
            try:
                chunks.get_nowait()
            except queue.Empty:
                pass
