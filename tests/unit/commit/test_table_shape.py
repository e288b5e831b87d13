from dataclasses import replace

from microingest.commit.table_shape import ExistingColumn, ExistingTable, compare, declared_shape
from microingest.declare.validate import parse_pipeline

SCHEMA = {
    "event_id": {"type": "string", "required": True},
    "amount": "double",
    "count": "integer",
    "at": {"type": "timestamp", "required": True},
}


def pipeline(**changes):
    return parse_pipeline({"name": "p", "topic": "t", "target_table": "public.p", "schema": SCHEMA, **changes})


def as_created(shape, **types) -> ExistingTable:
    """The table `prepare_target` would create for `shape`, with some column types changed."""
    columns = tuple(
        ExistingColumn(c.name, types.get(c.name, c.type), c.not_null, c.default is not None) for c in shape.columns
    )
    return ExistingTable(columns, (frozenset(shape.key),))


def without(table: ExistingTable, *names: str) -> ExistingTable:
    return replace(table, columns=tuple(c for c in table.columns if c.name not in names))


def verdicts(comparison) -> list[tuple[str, str]]:
    return [(d.column, d.verdict) for d in comparison.differences]


def test_append_target_is_the_source_position_then_the_declared_fields_keyed_by_position():
    shape = declared_shape(pipeline())
    assert [(c.name, c.type, c.not_null) for c in shape.columns] == [
        ("source_topic", "text", True),
        ("source_partition", "integer", True),
        ("source_offset", "bigint", True),
        ("kafka_timestamp", "timestamp with time zone", False),
        ("batch_id", "uuid", True),
        ("event_id", "text", True),
        ("amount", "double precision", False),
        ("count", "bigint", False),
        ("at", "timestamp with time zone", True),
        ("ingested_at", "timestamp with time zone", True),
    ]
    assert shape.key == ("source_topic", "source_partition", "source_offset") and not shape.key_required


def test_the_table_made_from_a_declaration_matches_it():
    for p in (
        pipeline(),
        pipeline(sink_mode="upsert_latest"),
        pipeline(
            sink_mode="aggregate",
            aggregate={
                "group_by": ["event_id"],
                "measures": {"events": "count", "total": {"sum": "amount"}},
                "time_bucket": {"field": "at", "width": "1 hour"},
            },
        ),
    ):
        shape = declared_shape(p)
        assert compare(shape, as_created(shape)).differences == ()


def test_a_newly_declared_field_is_added_as_a_nullable_column_even_when_required():
    shape = declared_shape(pipeline(schema={**SCHEMA, "discount": {"type": "double", "required": True}}))
    comparison = compare(shape, without(as_created(shape), "discount"))
    assert verdicts(comparison) == [("discount", "add")]
    assert [(c.name, c.type) for c in comparison.additions] == [("discount", "double precision")]
    assert comparison.refusals == ()


def test_a_missing_position_column_cannot_be_added_afterwards():
    shape = declared_shape(pipeline())
    comparison = compare(shape, without(as_created(shape), "batch_id"))
    assert verdicts(comparison) == [("batch_id", "refuse")]
    assert "new table" in comparison.refusals[0].advice


def test_a_column_narrower_than_its_field_is_refused_a_wider_one_noted():
    shape = declared_shape(pipeline())
    comparison = compare(shape, as_created(shape, count="integer", amount="numeric", event_id="character varying"))
    assert verdicts(comparison) == [("event_id", "note"), ("amount", "refuse"), ("count", "refuse")]
    assert "ALTER TABLE public.p ALTER COLUMN count TYPE bigint" in comparison.refusals[1].advice
    assert compare(shape, as_created(shape, count="numeric")).refusals == ()


def test_only_a_declared_column_of_another_type_counts_as_retyped():
    """What decides whether rows may go straight into the target in binary form (`spark.batch`)."""
    shape = declared_shape(pipeline())
    assert compare(shape, as_created(shape)).retyped == ()
    extra = as_created(shape)
    extra = replace(extra, columns=(*extra.columns, ExistingColumn("note", "text", False, False)))
    assert [d.verdict for d in compare(shape, extra).differences] == ["note"]
    assert compare(shape, extra).retyped == ()
    assert [d.column for d in compare(shape, as_created(shape, count="numeric")).retyped] == ["count"]


def test_not_null_where_the_declaration_allows_no_value_is_refused():
    shape = declared_shape(pipeline())
    table = as_created(shape)
    strict = replace(
        table, columns=tuple(replace(c, not_null=True) if c.name == "amount" else c for c in table.columns)
    )
    comparison = compare(shape, strict)
    assert verdicts(comparison) == [("amount", "refuse")]
    assert "DROP NOT NULL" in comparison.refusals[0].advice
    loose = replace(
        table, columns=tuple(replace(c, not_null=False) if c.name == "event_id" else c for c in table.columns)
    )
    assert compare(shape, loose).differences == ()  # a required field in a nullable column: every row fits


def test_a_field_removed_while_its_column_is_required_is_refused_otherwise_noted():
    before = declared_shape(pipeline())
    after = declared_shape(pipeline(schema={k: v for k, v in SCHEMA.items() if k != "event_id"}))
    comparison = compare(after, as_created(before))
    assert verdicts(comparison) == [("event_id", "refuse")]
    assert "put field event_id back" in comparison.refusals[0].advice
    relaxed = as_created(declared_shape(pipeline(schema={**SCHEMA, "event_id": "string"})))
    assert verdicts(compare(after, relaxed)) == [("event_id", "note")]


def test_a_changed_key_is_refused_where_the_sink_needs_it_and_noted_where_it_does_not():
    upsert = declared_shape(pipeline(sink_mode="upsert_latest"))
    unkeyed = replace(as_created(upsert), unique_keys=())
    assert verdicts(compare(upsert, unkeyed)) == [("(key)", "refuse")]
    append = declared_shape(pipeline())
    assert verdicts(compare(append, replace(as_created(append), unique_keys=(frozenset({"event_id"}),)))) == [
        ("(key)", "note")
    ]


def test_aggregate_groups_or_measures_changed_are_refused():
    aggregate = {"group_by": ["event_id"], "measures": {"events": "count"}}
    before = declared_shape(pipeline(sink_mode="aggregate", aggregate=aggregate))
    regrouped = declared_shape(pipeline(sink_mode="aggregate", aggregate={**aggregate, "group_by": ["at"]}))
    assert ("(key)", "refuse") in verdicts(compare(regrouped, as_created(before)))
    more = declared_shape(
        pipeline(
            sink_mode="aggregate", aggregate={**aggregate, "measures": {"events": "count", "total": {"sum": "amount"}}}
        )
    )
    assert verdicts(compare(more, as_created(before))) == [("total", "refuse")]


def test_bookkeeping_columns_are_made_with_new_tables_and_not_required_of_existing_ones():
    shape = declared_shape(pipeline())
    assert compare(shape, without(as_created(shape), "ingested_at")).differences == ()


PAYLOAD = {
    "total": {"type": "decimal", "precision": 12, "scale": 2},
    "shipped_on": "date",
    "order_id": "uuid",
    "blob": "bytes",
    "attributes": "json",
    "tags": {"type": "array", "items": "string"},
    "amounts": {"type": "array", "items": "decimal", "precision": 6, "scale": 3},
    "customer_id": {"type": "string", "path": "customer.id"},
}


def test_payload_types_get_their_postgres_types():
    shape = declared_shape(pipeline(schema=PAYLOAD))
    assert [(c.name, c.type) for c in shape.columns if c.role == "value"] == [
        ("total", "numeric(12,2)"),
        ("shipped_on", "date"),
        ("order_id", "uuid"),
        ("blob", "bytea"),
        ("attributes", "jsonb"),
        ("tags", "text[]"),
        ("amounts", "numeric(6,3)[]"),
        ("customer_id", "text"),
    ]
    assert compare(shape, as_created(shape)).differences == ()


def test_a_decimal_column_is_widened_never_narrowed():
    shape = declared_shape(pipeline(schema={**SCHEMA, "total": {"type": "decimal", "precision": 14, "scale": 3}}))
    for found, verdict in [
        ("numeric(12,2)", "widen"),  # more digits on both sides: every value kept
        ("numeric(11,3)", "widen"),
        ("numeric(14,3)", None),
        ("numeric", "note"),  # holds any value as it is
        ("numeric(16,3)", "refuse"),  # narrower declared: rows there may not fit
        ("numeric(14,4)", "refuse"),
        ("numeric(13,1)", "refuse"),  # 12 digits before the point, 11 declared
        ("double precision", "refuse"),
    ]:
        comparison = compare(shape, as_created(shape, total=found))
        assert [d.verdict for d in comparison.differences] == ([verdict] if verdict else []), found
        if verdict == "widen":
            assert [c.name for c in comparison.widenings] == ["total"]
        if verdict == "refuse":
            assert "declare the field as the column is" in comparison.refusals[0].advice


def test_a_partitioned_target_keys_its_rows_by_position_and_time_and_is_created_partitioned():
    from microingest.commit.table_shape import create_statements

    by_event = declared_shape(pipeline(partition_by={"field": "at", "interval": "1 day"}))
    assert by_event.key == ("source_topic", "source_partition", "source_offset", "at")
    assert by_event.partition_column == "at"
    statements = create_statements(by_event)
    assert len(statements) == 2  # the table, then its DEFAULT partition
    by_kafka = declared_shape(pipeline(partition_by={"field": "kafka_timestamp", "interval": "6 hours"}))
    assert by_kafka.column("kafka_timestamp").not_null and by_kafka.key[-1] == "kafka_timestamp"
    created = as_created(by_event)
    assert compare(by_event, replace(created, partition_key="RANGE (at)")).differences == ()
    assert [d.verdict for d in compare(by_event, created).differences] == ["refuse"]  # not partitioned
    plain = declared_shape(pipeline())
    assert [d.verdict for d in compare(plain, replace(as_created(plain), partition_key="RANGE (at)")).differences] == [
        "note"
    ]
