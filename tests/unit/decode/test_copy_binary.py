"""Rows in binary COPY form: every row once whatever the table's chunks, chunks within their bound, the batch id as
the 16 bytes a uuid column reads, and the one header and trailer pgpq itself would write."""

import uuid

import pgpq
import pyarrow as pa
import pytest

from helpers.copy_rows import tuples
from microingest.decode.copy_binary import HEADER, TRAILER, row_chunks

BATCH_ID = "6f1c3c1e-8a57-4a1f-9d3e-0c2b9f1e7a10"


def test_empty_and_unaligned_chunks_give_every_row_once_and_nothing_else():
    text = pa.chunked_array(
        [pa.array([], pa.string()), pa.array(["x"]), pa.array([], pa.string()), pa.array(["y", None])]
    )
    numbers = pa.chunked_array([pa.array([1, 2]), pa.array([-3])])
    got = tuples(list(row_chunks(pa.table({"t": text, "n": numbers}))))
    assert got == sorted(
        [
            (b"x", (1).to_bytes(8, "big", signed=True)),
            (b"y", (2).to_bytes(8, "big", signed=True)),
            (None, (-3).to_bytes(8, "big", signed=True)),
        ],
        key=repr,
    )


def test_an_empty_table_is_no_chunk_and_no_copy():
    assert list(row_chunks(pa.table({"t": pa.array([], pa.string())}))) == []


@pytest.mark.parametrize("bound", [64, 1000, 1 << 20])
def test_chunks_keep_within_their_bound_and_together_are_the_one_pass(bound):
    rows = pa.table({"t": [f"value {i}" * (i % 5) for i in range(500)], "n": list(range(500))})
    chunks = list(row_chunks(rows, bound))
    assert all(len(chunk) <= bound for chunk in chunks)
    assert b"".join(chunks) == b"".join(row_chunks(rows))


def test_the_batch_id_goes_as_its_16_bytes():
    rows = pa.table({"batch_id": [BATCH_ID, BATCH_ID], "source_offset": pa.array([7, 8], pa.int64())})
    assert {row[0] for row in tuples(list(row_chunks(rows)))} == {uuid.UUID(BATCH_ID).bytes}


def test_the_frame_is_the_one_pgpq_writes():
    encoder = pgpq.ArrowToPostgresBinaryEncoder(pa.schema([("n", pa.int64())]))
    assert (encoder.write_header(), encoder.finish()) == (HEADER, TRAILER)
