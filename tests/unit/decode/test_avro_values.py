"""What fastavro returns for Avro's logical types, as the declared types take it."""

import decimal
import uuid

from microingest.declare.pipeline import Field
from microingest.decode.avro import plain
from microingest.decode.codec import fields_from_object


def test_uuid_and_decimal_reach_string_and_double_columns():
    record = {"id": uuid.UUID("12345678-1234-5678-1234-567812345678"), "price": decimal.Decimal("12.50"), "n": 3}
    row = fields_from_object(
        {k: plain(v) for k, v in record.items()},
        [Field("id", "string"), Field("price", "double"), Field("n", "integer")],
    )
    assert row == ("12345678-1234-5678-1234-567812345678", 12.5, 3)
