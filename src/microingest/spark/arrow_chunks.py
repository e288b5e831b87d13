"""A DataFrame's rows on the driver as Arrow tables, one at a time as Spark hands them over.

`toArrow()` gathers every chunk of the result before it returns, so a batch of 500,000 records sat in the driver
whole, then again as COPY data. Spark Connect's client streams the result's Arrow batches (its
`to_table_as_iterator`, what `toLocalIterator` turns into Rows); they come here as tables, cast as `toArrow()` casts
them, so the driver can make each one COPY data and let it go. Under classic Spark (spark-submit) the result is
collected whole, as before, and handed on in its Arrow batches.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema


def arrow_chunks(frame) -> Iterator[pa.Table]:
    """The frame's rows as Arrow tables, in order, as they arrive."""
    if not type(frame).__module__.startswith("pyspark.sql.connect"):
        yield from (pa.Table.from_batches([b]) for b in frame.toArrow().to_batches())
        return
    schema = to_arrow_schema(frame.schema, error_on_duplicated_field_names_in_struct=True)
    client = frame._session.client
    for item in client.to_table_as_iterator(frame._plan.to_proto(client), frame._plan.observations):
        if isinstance(item, pa.Table):  # else the result's schema, which the frame's already gave
            yield item.cast(schema)
