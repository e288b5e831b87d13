"""Which topics a pipeline reads now, and where it stands on each: the ledger's positions against Kafka's bounds.

A pipeline reads the topics it names, or those Kafka lists whose whole name its pattern matches, as each plan finds
them: a topic that starts to match is read from the next plan on. A matched topic Kafka no longer lists keeps its
ledger positions and is reported as gone; a named topic Kafka does not have fails the planning.
"""

from __future__ import annotations

from microingest.batches import Positions, Sources
from microingest.commit.ledger import has_waited, read_ledgers
from microingest.declare.pipeline import Pipeline
from microingest.systems.kafka_access import TopicsState, list_topics, topics_state
from microingest.systems.pipeline_systems import PipelineSystems


def pipeline_sources(pipeline: Pipeline, systems: PipelineSystems) -> Sources:
    """Where the pipeline is on each of its topics (its ledger), and what Kafka holds."""
    with systems.db() as conn:
        ledgers = read_ledgers(conn, pipeline.name)
        waited = pipeline.topic_pattern is not None and not ledgers and has_waited(conn, pipeline.name)
    topics: tuple[str, ...] = pipeline.topics
    gone: tuple[str, ...] = ()
    if pipeline.topic_pattern is not None:
        listed = list_topics(systems.kafka_client)
        topics = tuple(sorted(t for t in listed if pipeline.reads_topic(t)))
        gone = tuple(sorted(t for t in ledgers if t not in listed and pipeline.reads_topic(t)))
    kafka = topics_state(systems.kafka_client, topics) if topics else TopicsState({}, {})
    positions = {t: Positions(ledgers.get(t, {}), *kafka.bounds[t]) for t in topics}
    return Sources(positions, gone, frozenset(ledgers), waited, kafka.ids)
