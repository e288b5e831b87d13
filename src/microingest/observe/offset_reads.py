"""The facts of one offset's story (`offset_story`), read from the ledger, the batch history, the dead letters, the
target table, Kafka and the consumer group mirror. Reads only; Kafka's part is best effort (a broker away leaves
its facts unknown, the rest stands)."""

from __future__ import annotations

import logging

from psycopg2 import sql

from microingest.commit.ledger import read_ledger
from microingest.declare.identifiers import table_identifier
from microingest.declare.pipeline import Pipeline
from microingest.decode.keys import key_decoder
from microingest.decode.records import BadRecord, RecordProcessor
from microingest.lag.mirror import group_id
from microingest.observe.offset_story import BatchMention, DeadLetterFacts, OffsetFacts
from microingest.systems.kafka_access import KafkaAccessError, group_offsets, partition_bounds, record_at
from microingest.systems.pipeline_systems import PipelineSystems

log = logging.getLogger(__name__)

_MENTION = (
    "SELECT b.batch_id::text, b.kind, b.committed_at, b.dag_id, b.run_id, b.note, b.filtered "
    "FROM microingest.batches b "
)
_HOLDING = (
    "WHERE b.pipeline = %s AND e->>'topic' = %s AND (e->>'partition')::int = %s AND (e->>'from')::bigint <= %s "
    "AND %s < (e->>'until')::bigint ORDER BY b.committed_at"
)


def offset_facts(pipeline: Pipeline, topic: str, partition: int, offset: int) -> OffsetFacts:
    systems = PipelineSystems.of(pipeline)
    facts = OffsetFacts(pipeline.name, pipeline.sink_mode, pipeline.target_table, topic, partition, offset)
    where = (pipeline.name, topic, partition, offset, offset)
    with systems.db() as conn, conn.cursor() as cur:
        facts.position = read_ledger(conn, pipeline.name, topic).get(partition)
        # A redrive's ranges span the dead letters of a page: its batch is told by the dead letter it resolved.
        cur.execute(
            _MENTION
            + "CROSS JOIN LATERAL jsonb_array_elements(b.ranges) e "
            + _HOLDING.replace("WHERE", "WHERE b.kind <> 'redrive' AND", 1),
            where,
        )
        facts.read_by = [BatchMention(*row) for row in cur.fetchall()]
        cur.execute(_MENTION + "CROSS JOIN LATERAL jsonb_array_elements(b.gaps) e " + _HOLDING, where)
        facts.lost_in = [BatchMention(*row) for row in cur.fetchall()]
        cur.execute(
            "SELECT error_class, error_message, batch_id::text, created_at, resolved_by::text, resolved_at, redrives "
            'FROM microingest.dead_letters WHERE pipeline = %s AND topic = %s AND partition = %s AND "offset" = %s',
            where[:4],
        )
        found = cur.fetchone()
        facts.dead_letter = None if found is None else DeadLetterFacts(*found)
        if pipeline.sink_mode != "aggregate":  # an append target keys its rows by position alone
            key = sql.SQL("record_key" if pipeline.sink_mode == "upsert_latest" else "NULL")
            cur.execute(
                sql.SQL(
                    "SELECT {} FROM {} WHERE source_topic = %s AND source_partition = %s AND source_offset = %s"
                ).format(key, table_identifier(pipeline.target_table)),
                where[1:4],
            )
            row = cur.fetchone()
            facts.has_row, facts.row_key = row is not None, None if row is None else row[0]
    _kafka_facts(pipeline, systems, facts)
    return facts


def _kafka_facts(pipeline: Pipeline, systems: PipelineSystems, facts: OffsetFacts) -> None:
    """Kafka's bounds and the mirror's offset; the record itself where the story needs it (a record read into no
    row: an upsert's key, an aggregate's group)."""
    try:
        earliest, latest = partition_bounds(systems.kafka_client, facts.topic)
        facts.earliest, facts.latest = earliest.get(facts.partition), latest.get(facts.partition)
        facts.mirrored = group_offsets(systems.kafka_client, group_id(pipeline.name), facts.topic).get(facts.partition)
        readable = facts.earliest is not None and facts.earliest <= facts.offset < (facts.latest or 0)
        unresolved = facts.dead_letter is not None and facts.dead_letter.resolved_by is None
        if readable and facts.read_by and not facts.has_row and not unresolved:
            record = record_at(systems.kafka_client, facts.topic, facts.partition, facts.offset)
            facts.in_kafka = record is not None
            if record is not None:
                _where_it_counts(pipeline, systems, facts, record)
    except KafkaAccessError as exc:
        log.warning("the story of %s[%d]@%d without Kafka's part: %s", facts.topic, facts.partition, facts.offset, exc)


def _where_it_counts(pipeline: Pipeline, systems: PipelineSystems, facts: OffsetFacts, record) -> None:
    if pipeline.sink_mode == "upsert_latest" and record.key is not None:
        with systems.db() as conn, conn.cursor() as cur:
            cur.execute(
                sql.SQL("SELECT source_offset FROM {} WHERE record_key = %s").format(
                    table_identifier(pipeline.target_table)
                ),
                (key_decoder(pipeline.key_format, systems.registry)(record.key),),
            )
            row = cur.fetchone()
        facts.key_holds = None if row is None else row[0]
    elif pipeline.sink_mode == "aggregate" and not pipeline.mask:  # a masked group's values are not told
        try:
            values = RecordProcessor(pipeline, systems.registry).process(record.key, record.value, record.headers)
        except BadRecord:
            return  # decodes no more with today's declaration: its group cannot be named
        by_name = dict(zip(("record_key", "is_tombstone", *pipeline.value_columns), values))
        facts.group = {name: _shown(by_name.get(name)) for name in pipeline.aggregate_spec.group_by}


def _shown(value) -> object:
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
