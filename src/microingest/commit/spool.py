"""A batch's COPY data as the driver collects it: held in memory up to a bound, in an unnamed temporary file beyond it.

The driver turns each Arrow chunk Spark hands it into binary COPY tuples (or dead letters' COPY text) and lets the
chunk go; the spool keeps what it made until the batch's one COPY reads it. So a batch of any size costs the driver
one chunk and the bound (`settings.batch_memory_bytes`), not the whole batch twice over, and the commit still
writes once, after everything was decoded and checked. The temporary file has no name (Linux unlinks it at once): a
killed job leaves nothing behind.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable

# How much a COPY asks of the spool at a time (psycopg2's default is 8 KiB: a call per row of a wide table).
READ_BYTES = 1 << 20


class Spool:
    """Bytes written once, in order, then read once by a COPY."""

    def __init__(self, memory_bytes: int):
        # At least 1: SpooledTemporaryFile reads a max_size of 0 as no bound at all.
        self._bound = max(memory_bytes, 1)
        self._file = tempfile.SpooledTemporaryFile(max_size=self._bound)  # noqa: SIM115 (closed by close())
        self.size = 0

    @classmethod
    def of(cls, chunks: Iterable[bytes], memory_bytes: int) -> Spool:
        spool = cls(memory_bytes)
        for chunk in chunks:
            spool.write(chunk)
        return spool

    def write(self, chunk: bytes) -> None:
        if chunk:
            self._file.write(chunk)
            self.size += len(chunk)

    def __bool__(self) -> bool:
        return self.size > 0

    @property
    def on_disk(self) -> bool:
        """Whether it outgrew its bound and went to the temporary file."""
        return self.size > self._bound  # SpooledTemporaryFile rolls over once it holds more than its max_size

    def reader(self, header: bytes = b"", trailer: bytes = b"") -> _Framed:
        """A file-like reader of the whole spool from its start, between `header` and `trailer`, for COPY FROM STDIN."""
        self._file.seek(0)
        return _Framed(self._file, header, trailer)

    def read_all(self) -> bytes:
        self._file.seek(0)
        return self._file.read()

    def close(self) -> None:
        self._file.close()


class _Framed:
    def __init__(self, file, header: bytes, trailer: bytes):
        self._file, self._header, self._trailer = file, header, trailer

    def read(self, size: int = -1) -> bytes:
        if self._header:
            data, self._header = self._header, b""
            return data
        data = self._file.read(size if size and size > 0 else READ_BYTES)
        if data:
            return data
        data, self._trailer = self._trailer, b""
        return data
