"""Binary COPY rows read back field by field, to compare two encodings of the same rows in any order."""

from __future__ import annotations

import struct


def tuples(chunks: list[bytes]) -> list[tuple[bytes | None, ...]]:
    """The rows of header-less binary COPY chunks, each as its fields' bytes (None for NULL), sorted."""
    data, at, out = b"".join(chunks), 0, []
    while at < len(data):
        (fields,) = struct.unpack_from(">h", data, at)
        at += 2
        row: list[bytes | None] = []
        for _ in range(fields):
            (size,) = struct.unpack_from(">i", data, at)
            at += 4
            row.append(None if size < 0 else data[at : at + size])
            at += max(size, 0)
        out.append(tuple(row))
    return sorted(out, key=repr)
