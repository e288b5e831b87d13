"""The one CSV writer of staged rows, on tables whose columns are cut into chunks differently, empty ones among them
(as rows the JVM took joined to rows the reference decoded give them)."""

import pyarrow as pa

from microingest.decode.staged_rows import csv_bytes


def test_empty_and_unaligned_chunks_write_every_row_once_and_nothing_else():
    text = pa.chunked_array(
        [pa.array([], pa.string()), pa.array(["x"]), pa.array([], pa.string()), pa.array(["y", "z"])]
    )
    numbers = pa.chunked_array([pa.array([1, 2]), pa.array([3])])
    assert csv_bytes(pa.table({"t": text, "n": numbers})) == b'"x",1\n"y",2\n"z",3\n'


def test_an_empty_table_is_no_bytes():
    assert csv_bytes(pa.table({"t": pa.chunked_array([pa.array([], pa.string())])})) == b""
