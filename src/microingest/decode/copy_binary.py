"""Decoded rows (an Arrow table in the staged layout, or a target's columns) → Postgres' binary COPY format, by pgpq.

Each value goes over as Postgres itself stores it: a double's eight bytes, a timestamp's microseconds, text as its
UTF-8, so nothing is formatted on this side or parsed on Postgres' (a CSV's text costs both, and Postgres three times
the CPU per row). The encoder writes the column types Arrow gives, which must therefore be the COPY target's own:
the staged layout's, or an append target's whose columns have the declared types (`Comparison.retyped`: a target
with wider columns, numeric for bigint say, takes its rows through the staging table, where Postgres converts them).
A json column goes as jsonb: its text, marked so in its Arrow field's metadata (`batch_columns.PG_TYPE_KEY`).

Chunks carry rows only; the commit puts the one header and trailer of a COPY around them (`copy_commit.copy_spooled`),
so chunks from any number of Spark tasks make one stream.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pgpq
import pgpq.encoders
import pgpq.schema
import pyarrow as pa
import pyarrow.compute as pc

from microingest.batches import ROW_LAYOUT
from microingest.decode.batch_columns import PG_TYPE_KEY

# The binary COPY signature, its flags and its header extension's length; and the trailer, a field count of -1.
HEADER = b"PGCOPY\n\xff\r\n\x00" + bytes(4) + bytes(4)
TRAILER = b"\xff\xff"
_UUID_COLUMNS = frozenset(c.name for c in ROW_LAYOUT if c.pg_type == "uuid")
_UUID = pa.binary(16)


def row_chunks(rows: pa.Table, max_bytes: int | None = None) -> Iterator[bytes]:
    """The rows as binary COPY tuples: in one chunk, or in chunks of at most `max_bytes` (unless one row is larger)."""
    data = _tuples(_wire(rows))
    if max_bytes is None or len(data) <= max_bytes or rows.num_rows < 2:
        if data:
            yield data
        return
    half = rows.num_rows // 2
    yield from row_chunks(rows.slice(0, half), max_bytes)
    yield from row_chunks(rows.slice(half), max_bytes)


def _tuples(rows: pa.Table) -> bytes:
    """The rows' tuples alone: pgpq's stream (it buffers, so the last rows come with the trailer) without its frame."""
    encoders = {
        field.name: pgpq.encoders.StringEncoderBuilder.new_with_output(field, pgpq.schema.Jsonb())
        if (field.metadata or {}).get(PG_TYPE_KEY) == b"jsonb"
        else pgpq.ArrowToPostgresBinaryEncoder.infer_encoder(field)
        for field in rows.schema
    }
    encoder = pgpq.ArrowToPostgresBinaryEncoder.new_with_encoders(rows.schema, encoders)
    if encoder.write_header() != HEADER:
        raise RuntimeError("pgpq wrote another binary COPY header than Postgres 15's")
    stream = b"".join([encoder.write_batch(batch) for batch in rows.to_batches() if batch.num_rows])
    stream += encoder.finish()
    if not stream.endswith(TRAILER):
        raise RuntimeError("pgpq ended its binary COPY stream without the trailer")
    return stream[: -len(TRAILER)]


def _wire(rows: pa.Table) -> pa.Table:
    """The table with its uuid columns (a batch id, as text) as their 16 bytes, the form uuid_recv reads."""
    for i, name in enumerate(rows.column_names):
        if name in _UUID_COLUMNS and rows.schema.field(i).type != _UUID:
            rows = rows.set_column(i, name, _uuid_bytes(rows.column(i)))
    return rows


def _uuid_bytes(text: pa.ChunkedArray) -> pa.ChunkedArray:
    distinct = pc.unique(text)  # a batch's rows share one id: convert it once, then spread it by index
    as_bytes = pa.array([None if u is None else uuid.UUID(u).bytes for u in distinct.to_pylist()], _UUID)
    return pa.chunked_array([as_bytes.take(pc.index_in(chunk, distinct)) for chunk in text.chunks], _UUID)
