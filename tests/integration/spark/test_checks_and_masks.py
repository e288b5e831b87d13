"""Checks before commit and masked columns on the real platform: a record failing a record-level check is a dead
letter, a batch failing a batch-level one is refused whole with its condition and a sample; masked fields land
masked, and a masked pipeline's secrets appear nowhere a test can look (target, dead letters, history, job log)."""

import hashlib
import hmac
import json

from psycopg2 import sql

from helpers.pipeline_env import own_env
from helpers.platform_logs import platform_logs, written_since
from microingest.decode.staged_rows import WITHHELD
from microingest.plan.live import plan_live_run
from microingest.systems.kafka_access import produce

CHECKS = [
    {"field": "user_id", "not_null": True, "on_fail": "dead_letter"},
    {"sql": "amount < 1000", "on_fail": "dead_letter"},
    {"sql": "count(*) FILTER (WHERE amount < 0) = 0", "on_fail": "refuse"},
]


def event(i: int, **fields) -> bytes:
    return json.dumps({"event_id": f"e{i}", "user_id": f"u{i}", "amount": float(i), "event_time": i, **fields}).encode()


def test_records_failing_a_record_check_are_dead_letters_and_the_rest_land(pg, kafka, tmp_path, monkeypatch):
    env = own_env(pg, kafka, tmp_path, monkeypatch, checks=CHECKS)
    values = [event(i) for i in range(60)]
    values[7] = event(7, user_id=None)
    values[8] = event(8, amount=5000.0)
    values[9] = event(9, user_id=None, amount=5000.0)  # fails both: the first check names it
    sent = produce(env.kafka, env.topic, [(f"k{i}".encode(), v) for i, v in enumerate(values)])

    env.ingest_all()

    rows = env.query(sql.SQL("SELECT source_partition, source_offset, event_id, amount FROM {}").format(env.table))
    assert sorted(rows) == sorted((*sent[i], f"e{i}", float(i)) for i in range(60) if i not in (7, 8, 9))
    dead = {(p, o): (cls, msg, bytes(value)) for p, o, cls, msg, _, value, _ in env.dead_letters()}
    assert dead == {
        sent[7]: ("check_failed", "checks[0] failed: `user_id` IS NOT NULL", values[7]),
        sent[8]: ("check_failed", "checks[1] failed: amount < 1000", values[8]),
        sent[9]: ("check_failed", "checks[0] failed: `user_id` IS NOT NULL", values[9]),
    }


def test_a_batch_failing_a_batch_check_is_refused_with_its_condition_and_a_sample(pg, kafka, tmp_path, monkeypatch):
    env = own_env(pg, kafka, tmp_path, monkeypatch, checks=CHECKS)
    values = [event(i) for i in range(20)]
    values[13] = event(13, amount=-2.5)
    sent = produce(env.kafka, env.topic, [(f"k{i}".encode(), v) for i, v in enumerate(values)])

    result = env.spark_job(plan_live_run(env.pipeline))

    assert result.returncode != 0
    assert "CheckFailedError" in result.stdout
    assert "checks[2] is false: count(*) FILTER (WHERE amount < 0) = 0; nothing was written" in result.stdout
    partition, offset = sent[13]
    assert f"Sample (amount < 0): {env.topic}[{partition}]@{offset} amount=-2.5" in result.stdout
    assert env.query(sql.SQL("SELECT count(*) FROM {}").format(env.table)) == [(0,)]
    assert env.batch_count() == 0 and env.dead_letters() == [] and env.ledger() == {}


def test_masked_fields_land_masked_and_their_secrets_appear_nowhere(pg, kafka, tmp_path, monkeypatch):
    key = "a-key-of-the-tests-own"
    monkeypatch.setenv("AIRFLOW_CONN_IT_MASK_KEY", json.dumps({"conn_type": "generic", "password": key}))
    env = own_env(
        pg,
        kafka,
        tmp_path,
        monkeypatch,
        mask={"user_id": "hmac_sha256", "event_type": "sha256", "event_id": "truncate_24"},
        mask_conn_id="it_mask_key",
        # A cast that fails on a masked value: Spark's message quotes it, the dead letter must not.
        transform_sql="SELECT source_topic, source_partition, source_offset, event_id, user_id, event_type, "
        "amount + CAST(CASE WHEN user_id LIKE 'cast-%' THEN user_id ELSE '0' END AS DOUBLE) AS amount, event_time "
        "FROM batch",
    )
    secrets = [f"secret-user-{i}@example.com" for i in range(30)]
    logs = platform_logs()
    values = [
        json.dumps({"event_id": f"10.1.{i}.77", "user_id": s, "event_type": f"type-{s}", "amount": 1.0}).encode()
        for i, s in enumerate(secrets)
    ]
    values[5] = json.dumps({"event_id": "10.1.5.77", "user_id": secrets[5], "amount": "not a number"}).encode()
    secrets[9] = f"cast-o'{secrets[9]}\nline two"  # Spark escapes the quote, keeps the line break
    values[9] = json.dumps({"event_id": "10.1.9.77", "user_id": secrets[9], "amount": 1.0}).encode()
    sent = produce(env.kafka, env.topic, [(s.encode(), v) for s, v in zip(secrets, values)])

    results = env.ingest_all()

    rows = env.query(
        sql.SQL("SELECT source_partition, source_offset, event_id, user_id, event_type FROM {}").format(env.table)
    )
    expected = [
        (
            *sent[i],
            f"10.1.{i}.0",
            hmac.new(key.encode(), secrets[i].encode(), hashlib.sha256).hexdigest(),
            hashlib.sha256(f"type-{secrets[i]}".encode()).hexdigest(),
        )
        for i in range(30)
        if i not in (5, 9)
    ]
    assert sorted(rows) == sorted(expected)
    dead = env.query(
        'SELECT partition, "offset", error_class, error_message, record_key, record_value, headers '
        "FROM microingest.dead_letters WHERE pipeline = %s",
        (env.pipeline.name,),
    )
    assert sorted((p, o, cls, msg, key_, value, headers) for p, o, cls, msg, key_, value, headers in dead) == sorted(
        [(*sent[5], "wrong_type", WITHHELD, None, None, None), (*sent[9], "sql_failed", WITHHELD, None, None, None)]
    )
    everything = (
        repr(env.query(sql.SQL("SELECT * FROM {}").format(env.table)))
        + repr(dead)
        + repr(env.query("SELECT * FROM microingest.batches WHERE pipeline = %s", (env.pipeline.name,)))
        + "".join(r.stdout + r.stderr for r in results)
    )
    for secret in secrets + [key]:
        assert secret not in everything
    # Every log the platform wrote meanwhile: Spark's own (the Spark Connect server's driver and executors) quote the
    # value a cast failed on, as '***' once redacted.
    written = written_since(logs)
    assert any("CAST_INVALID_INPUT" in text for text in written.values()), "the failing cast was logged somewhere"
    marks = [f"secret-user-{i}@example.com" for i in range(30)] + [key]  # each secret's own part
    leaks = {str(path): mark for path, text in written.items() for mark in marks if mark in text}
    assert leaks == {}
