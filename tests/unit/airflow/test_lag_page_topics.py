"""The lag page of a pipeline reading several topics: a topic column, a GONE line for a matched topic Kafka no longer
lists, and the story form asking which topic (one topic: the form names it without asking)."""

from datetime import datetime, timedelta, timezone

from microingest.airflow.lag_page import render
from microingest.lag.figures import PartitionLag
from microingest.lag.states import LagState, Verdict
from microingest.lag.status import PipelineStatus

NOW = datetime(2026, 11, 27, 12, tzinfo=timezone.utc)


def page(*topics: str, gone: tuple[str, ...] = ()) -> str:
    status = PipelineStatus(
        "orders",
        "topics matching 'orders-.*'",
        Verdict(LagState.OK, ""),
        timedelta(minutes=15),
        partitions=[(PartitionLag(t, 0, 5, 9, 0), Verdict(LagState.OK, "")) for t in topics],
        gone=gone,
    )
    return " ".join(render([(status, [])], NOW, []).split())


def test_each_partition_row_names_its_topic_and_the_form_asks_which():
    html = page("orders-eu", "orders-us", gone=("orders-apac",))
    assert "<th>topic</th><th>partition</th>" in html
    assert "<tr><td>orders-eu</td><td>0</td>" in html and "<tr><td>orders-us</td><td>0</td>" in html
    assert '<select name="topic"><option>orders-eu</option><option>orders-us</option></select>' in html
    assert "Topic orders-apac matches but Kafka no longer lists it" in html
    assert "topics matching &#39;orders-.*&#39; · offset lag 8" in html


def test_a_single_topics_form_names_it_without_asking():
    html = page("orders-eu")
    assert '<input type="hidden" name="topic" value="orders-eu">' in html and "<select" not in html
    assert "no longer lists" not in html
