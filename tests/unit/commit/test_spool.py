"""The spool a batch's COPY data waits in: what went in comes out once, framed, whether it stayed in memory or not."""

from __future__ import annotations

import pytest

from microingest.commit.spool import Spool


def _read_all(reader, size: int) -> bytes:
    out = []
    while data := reader.read(size):
        out.append(data)
    return b"".join(out)


@pytest.mark.parametrize("bound", [0, 10, 1 << 20])
@pytest.mark.parametrize("size", [1, 7, 1 << 20])
def test_what_was_written_is_read_back_between_header_and_trailer(bound, size):
    chunks = [bytes([i % 251]) * (i * 3) for i in range(40)]
    spool = Spool.of(chunks, bound)
    assert spool.size == sum(map(len, chunks))
    assert spool.on_disk == (spool.size > bound)
    assert spool._file._rolled == spool.on_disk  # what SpooledTemporaryFile itself did
    assert _read_all(spool.reader(b"HEAD", b"END"), size) == b"HEAD" + b"".join(chunks) + b"END"
    assert _read_all(spool.reader(), size) == b"".join(chunks)  # from its start again
    spool.close()


def test_nothing_written_is_false_and_empty_chunks_are_nothing():
    spool = Spool.of([b"", b""], 10)
    assert not spool and spool.size == 0 and not spool.on_disk
    spool.write(b"x")
    assert spool and spool.read_all() == b"x"
