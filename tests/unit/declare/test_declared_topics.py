"""The topics a declaration reads: `topic`, `topics` or `topic_pattern`, exactly one; how a pattern matches and how a
question about one partition names its topic."""

import pytest
from test_validate import VALID

from microingest.commit.restart import set_aside_name
from microingest.declare.identifiers import is_topic_name
from microingest.declare.pipeline import DeclarationError
from microingest.declare.validate import parse_pipeline


def declared(**topics):
    raw = {k: v for k, v in VALID.items() if k != "topic"}
    return parse_pipeline({**raw, **topics})


def test_one_topic_a_list_or_a_pattern():
    assert declared(topic="orders").topics == ("orders",)
    listed = declared(topics=["orders-eu", "orders-us"])
    assert (listed.topics, listed.topic_pattern) == (("orders-eu", "orders-us"), None)
    assert listed.sources_named == "topics orders-eu, orders-us"
    matched = declared(topic_pattern=r"orders-.*")
    assert (matched.topics, matched.topic_pattern) == ((), "orders-.*")
    assert matched.sources_named == "topics matching 'orders-.*'"


@pytest.mark.parametrize(
    "topics, field, problem",
    [
        ({}, "topic", "declare exactly one of topic, topics or topic_pattern: which topics does the pipeline read?"),
        ({"topic": "a", "topics": ["b"]}, "topics", "declare exactly one of topic, topics or topic_pattern, not "),
        ({"topics": ["a", "b", "a"]}, "topics", "names a more than once"),
        ({"topics": []}, "topics", "must be a non-empty list of topic names"),
        ({"topics": "orders"}, "topics", "must be a non-empty list of topic names"),
        ({"topics": ["ok", "bad topic!"]}, "topics.1", "is not a valid Kafka topic name"),
        ({"topic_pattern": "orders-("}, "topic_pattern", "is not a valid regular expression"),
        ({"topic_pattern": ""}, "topic_pattern", "must be a regular expression matching topic names, got nothing"),
    ],
)
def test_a_malformed_choice_of_topics_names_its_field(topics, field, problem):
    with pytest.raises(DeclarationError) as caught:
        declared(**topics)
    assert caught.value.field == field
    assert problem in caught.value.problem


def test_a_pattern_matches_whole_names_only():
    matched = declared(topic_pattern=r"orders-(eu|us)")
    assert matched.reads_topic("orders-eu") and matched.reads_topic("orders-us")
    assert not matched.reads_topic("orders-eu-retry") and not matched.reads_topic("old-orders-eu")
    listed = declared(topics=["a", "b"])
    assert listed.reads_topic("a") and not listed.reads_topic("c")


def test_a_pattern_never_matches_the_name_a_restarted_topics_old_records_are_kept_under():
    aside = set_aside_name("orders-eu", ["0f4c2a1e-9a8b-4c7d-8e6f-5a4b3c2d1e0f"])
    assert aside.startswith("orders-eu@") and not is_topic_name(aside)
    assert not declared(topic_pattern=r"orders-.*").reads_topic(aside)
    assert not declared(topic_pattern=r".*").reads_topic(aside)


def test_a_partition_names_its_topic_unless_the_pipeline_reads_one_only():
    assert declared(topic="orders").topic_asked(None) == "orders"
    assert declared(topics=["a", "b"]).topic_asked("b") == "b"
    with pytest.raises(ValueError, match="reads topics a, b: say which topic"):
        declared(topics=["a", "b"]).topic_asked(None)
    with pytest.raises(ValueError, match="does not read topic c"):
        declared(topics=["a", "b"]).topic_asked("c")
    with pytest.raises(ValueError, match=r"reads topics matching 'o-\.\*': say which topic"):
        declared(topic_pattern="o-.*").topic_asked(None)
