"""Avro writer schemas a hostile block count could make endless, found before fastavro reads a record."""

from microingest.decode.avro_bounds import unbounded_array


def record(*fields, name="R"):
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


def test_arrays_of_items_that_take_no_bytes_are_found_with_their_path():
    assert unbounded_array(record(("a", {"type": "array", "items": "null"}))) == ".a"
    empty = record(name="Empty")
    assert unbounded_array(record(("e", empty), ("xs", {"type": "array", "items": "Empty"}))) == ".xs"
    nested = record(
        ("m", {"type": "map", "values": {"type": "array", "items": {"type": "fixed", "name": "Z", "size": 0}}})
    )
    assert unbounded_array(nested) == ".m{}"
    assert unbounded_array({"type": "array", "items": {"type": "null"}}) == ""


def test_arrays_whose_items_take_a_byte_at_least_are_bounded_by_the_values_length():
    for items in (
        "int",
        "string",
        "boolean",
        ["null", "int"],
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "array", "items": "int"},
        {"type": "map", "values": "null"},
        record(("n", "null"), ("i", "int"), name="Half"),
    ):
        assert unbounded_array(record(("a", {"type": "array", "items": items}))) is None, items
    assert (
        unbounded_array(record(("id", "string"), ("at", {"type": "long", "logicalType": "timestamp-millis"}))) is None
    )
