from microingest.observe.doctor_rules import (
    BAD,
    OK,
    WARN,
    announcement_findings,
    dead_letter_findings,
    history_findings,
    kafka_findings,
    mirror_findings,
)


def severities(findings):
    return [f.severity for f in findings]


def test_positions_outside_what_kafka_holds_are_named():
    found = kafka_findings("t", {0: 5, 1: 90, 2: 3, 3: 1}, {0: 0, 1: 0, 2: 10}, {0: 9, 1: 50, 2: 20})
    assert [f.what for f in found] == [
        "t[1]: the ledger's position 90 is beyond the log end 50",
        "t[2]: retention deleted offsets [3, 10) before they were read",
        "t[3]: the ledger holds position 1, but Kafka has no such partition",
    ]
    assert all(f.severity == BAD and f.todo for f in found)
    assert severities(kafka_findings("t", {0: 5}, {0: 0}, {0: 9})) == [OK]


def test_each_ledger_position_must_be_where_its_batch_ended():
    found = history_findings(
        [("t", 0, 10, "b1", "ingest", 10), ("t", 1, 7, "b2", None, None), ("t", 2, 8, "b3", "skip", 5)]
    )
    assert severities(found) == [BAD, BAD]
    assert "batch b2, which the batch history lacks" in found[0].what and "(skip) ended (5)" in found[1].what
    assert severities(history_findings([("t", 0, 10, "b1", "pin", 10)])) == [OK]


def test_a_mirror_behind_is_a_warning_and_one_ahead_is_wrong():
    found = mirror_findings("g", "t", {0: 10, 1: 10, 2: 10}, {0: 10, 1: 8, 2: 12})
    assert [(f.severity, f.what) for f in found] == [
        (WARN, "t[1]: consumer group g is 2 behind the ledger (8 < 10)"),
        (BAD, "t[2]: consumer group g is ahead of the ledger (12 > 10): something else commits offsets to it"),
    ]
    assert severities(mirror_findings("g", "t", {0: 3}, {})) == [WARN]
    assert severities(mirror_findings("g", "t", {0: 3, 1: 5}, {1: 5}, pinned=[0])) == [OK]  # a pin mirrors nothing
    assert severities(mirror_findings("g", "t", {0: 3}, {0: 3})) == [OK]


def test_batches_no_asset_event_named_are_named_with_their_run():
    found = announcement_findings({("d", "r1"): ({"a", "b"}, {"a"}), ("d", "r2"): ({"c"}, {"c", "x"})})
    assert [f.what for f in found] == ["DAG run r1 committed 1 batch(es) no Asset event announced (b)"]
    assert "clear the run's announce task" in found[0].todo
    assert severities(announcement_findings({})) == [OK]


def test_unresolved_dead_letters_point_to_a_redrive():
    [found] = dead_letter_findings({"wrong_type": 3, "invalid_json": 1})
    assert (found.severity, found.what) == (WARN, "4 unresolved dead letter(s): invalid_json 1, wrong_type 3")
    assert "microingest redrive" in found.todo
    assert severities(dead_letter_findings({})) == [OK]
