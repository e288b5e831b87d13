"""Bad records end in the dead-letter table in the same transaction as their batch; too many refuse the batch."""

import json
import re
import struct

import pytest

from helpers.pipeline_env import RawHeaderName
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_next_batch


def good(i, amount=1.0):
    return json.dumps({"event_id": f"ok-{i}", "user_id": "u", "amount": amount}).encode()


BAD = [  # (key, value, headers, expected error_class)
    (b"k1", b"\xff\xfe\xfd", None, "invalid_utf8"),
    (b"k2", b'{"event_id": "trunc', None, "invalid_json"),
    (b"k3", b'{"event_id": "x", "amount": "a lot"}', None, "wrong_type"),
    (b"k4", b'{"user_id": "no id"}', None, "missing_field"),
    (b"k5", b'{"event_id": "big", "pad": "' + b"x" * 5000 + b'"}', None, "value_too_large"),
    (b"k6", None, None, "tombstone"),
    (b"k7", b'{"event_id": "neg", "amount": -5}', None, "transform_failed"),
    (b"k8", b"[1, 2, 3]", None, "not_an_object"),
    (b"k9", b'{"event_id": 42}', [("trace", b"\x00\xff")], "wrong_type"),
]
HANDLED = [  # records that look odd but are valid for the append sink: they land in the target
    (None, good("null-key"), None),  # null key
    (b"\xff\xfe", good("binary-key"), None),  # key that is not UTF-8
    (b"k", good("headers"), [("x-odd", b"\xff\x00"), ("x-odd", b"")]),  # unexpected, repeated, binary headers
    (b"dup", good("dup-1"), None),  # duplicate keys in one batch:
    (b"dup", good("dup-2"), None),  # both are records, both land
]


@pytest.mark.quick
def test_every_bad_record_is_dead_lettered_once_and_the_rest_lands(env):
    env.redeclare(
        max_value_bytes=1000,
        transform="microingest.transforms:require_positive_amount",
        dead_letter={"max_fraction": 0.9},
    )
    goods = [(f"g{i}".encode(), good(i)) for i in range(40)]
    records = goods[:20] + [b[:3] for b in BAD] + HANDLED + goods[20:]
    positions = env.send(records)
    bad_positions = positions[20 : 20 + len(BAD)]

    env.ingest_all()

    landed = {(p, o) for p, o, _ in env.target_rows()}
    dead = env.dead_letters()
    dead_positions = {(p, o) for p, o, *_ in dead}
    assert landed | dead_positions == set(positions), "every produced record is in the target or the DLQ"
    assert not landed & dead_positions and len(landed) + len(dead) == len(positions), "and in only one of them"
    assert dead_positions == set(bad_positions)
    by_position = {(p, o): (cls, msg, key, value, headers) for p, o, cls, msg, key, value, headers in dead}
    for (key, value, _headers, error_class), position in zip(BAD, bad_positions):
        cls, msg, stored_key, stored_value, _stored_headers = by_position[position]
        assert cls == error_class and msg, (position, cls, msg)
        assert (bytes(stored_key), None if stored_value is None else bytes(stored_value)) == (key, value)
    assert by_position[bad_positions[-1]][4] == [{"key": "trace", "value_base64": "AP8="}]
    [(_, _, read, written, _, _)] = env.batches()
    assert (read, written) == (len(positions), len(landed))
    assert env.query("SELECT dead_letters FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)) == [
        (len(BAD),)
    ]


def test_too_many_bad_records_refuse_the_whole_batch(env):
    env.redeclare(dead_letter={"max_fraction": 0.2})
    env.send([(b"k", good(i)) for i in range(6)] + [(b"k", b"not json")] * 4)
    plan = plan_next_batch(env.pipeline)

    result = env.spark_job(list(plan.ranges))

    assert result.returncode == REFUSED_EXIT
    assert "4 of 10 records bad (40.0%) exceeds dead_letter.max_fraction 0.2" in result.stdout
    assert "invalid_json: value is not valid JSON" in result.stdout
    # The first reasons name each record's position, typed from the executors (no COPY text split back).
    assert re.search(rf"first reasons: {re.escape(env.topic)}\[\d+\]@[6-9] invalid_json: ", result.stdout)
    assert env.target_rows() == [] and env.dead_letters() == [] and env.ledger() == {} and env.batches() == []


# The poison records: before values were proven storable, each failed its batch on every retry.
POISON = [  # (key, value, headers, expected error_class or None for a row)
    (struct.pack(">i", 7), good("int-key"), None, None),  # Kafka's IntegerSerializer
    (struct.pack(">q", 7), good("long-key"), [("trace", b"\x00")], None),  # LongSerializer, NUL header
    (b"k", b'{"event_id": "nul-header", "amount": "x"}', [("trace", b"a\x00b")], "wrong_type"),
    (b"k", b'{"event_id": "surrogate", "user_id": "\\ud800"}', None, "unstorable"),
    (b"k", b'{"event_id": "ms", "event_time": 1e20}', None, "unstorable"),
    (b"k", b'{"event_id": "iso", "event_time": "0001-01-01T00:30:00+01:00"}', None, "unstorable"),
    (b"k", b'{"event_id": "nul\\u0000"}', None, "unstorable"),
    (b"\x00", b'{"event_id": "year-one", "event_time": "0001-01-01T00:00:00"}', None, None),
]


def test_a_run_through_airflow_with_poison_records_among_good_ones_reaches_the_log_end(api, served):
    env = served["poison"]
    records = [(f"g{i}".encode(), good(i)) for i in range(300)]
    for i, poison in enumerate(POISON):
        records.insert(37 * i + 5, poison[:3])
    positions = env.send(records)

    run = api.wait_for_run(env.pipeline.dag_id, api.trigger(env.pipeline.dag_id, {}), timeout=600)
    assert (run.state, run.tasks) == ("success", {"ingest": "success", "announce": "success"})

    ends: dict[int, int] = {}  # the topic is this test's alone: its log ends follow the last acknowledged offsets
    for p, o in positions:
        ends[p] = max(ends.get(p, 0), o + 1)
    assert env.ledger() == ends, "the ledger is at the log end"
    landed = [(p, o) for p, o, _ in env.target_rows()]
    dead = {(p, o): cls for p, o, cls, *_ in env.dead_letters()}
    assert sorted(landed + list(dead)) == sorted(positions), "every record a row or a dead letter, once"
    by_position = dict(zip(positions, records))
    expected = {positions[records.index(r[:3])]: r[3] for r in POISON if r[3]}
    assert dead == expected, {pos: by_position[pos] for pos in set(dead) ^ set(expected)}


def test_a_header_name_that_is_not_utf8_is_kept_as_kafkas_java_client_reads_it(env):
    """Spark's Kafka source hands header names over as Java strings, decoded by Kafka's client with each malformed
    byte replaced by U+FFFD before microingest sees them: what the dead letter keeps of such a name (its value's
    bytes are kept whole), as docs/exactly-once.md says."""
    env.redeclare(dead_letter={"max_fraction": None})
    env.send_to(0, [(b"k", b"not json", [(RawHeaderName(b"n\xff\xfeame"), b"\xff"), ("ok", b"v")])])
    env.ingest_all()
    [(_, _, cls, _, key, value, headers)] = env.dead_letters()
    assert (cls, bytes(key), bytes(value)) == ("invalid_json", b"k", b"not json")
    assert headers == [{"key": "n\ufffd\ufffdame", "value_base64": "/w=="}, {"key": "ok", "value": "v"}]
