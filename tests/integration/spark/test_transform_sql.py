"""A pipeline's transform_sql on the real platform: the statement computes and filters in Spark, a record it fails on
by value becomes a dead letter with Spark's message, and every record read is once a row, a dead letter or a counted
drop. A statement Spark refuses fails the run with its reason, nothing written."""

import json

from psycopg2 import sql

from helpers.pipeline_env import new_env, own_env
from microingest.batches import RunInfo
from microingest.observe.offset_reads import offset_facts
from microingest.observe.offset_story import story
from microingest.systems.kafka_access import produce

POSITION = "source_topic, source_partition, source_offset"
STATEMENT = (
    f"SELECT {POSITION}, upper(event_id) AS event_id, user_id, event_type, "
    "CAST(user_id AS DOUBLE) * 2 + amount AS amount, event_time FROM batch WHERE event_type <> 'test'"
)


def event(i: int, event_type: str = "click", user_id: str | None = None) -> dict:
    return {
        "event_id": f"e{i}",
        "user_id": user_id or str(i),
        "event_type": event_type,
        "amount": 0.25,
        "event_time": i,
    }


def test_a_statement_computes_filters_and_dead_letters_each_record_once(pg, kafka, tmp_path, monkeypatch):
    env = own_env(pg, kafka, tmp_path, monkeypatch, transform_sql=STATEMENT)
    events = [event(i, "test" if i % 7 == 0 else "click") for i in range(300)]
    events[101] = event(101, user_id="not-a-number")  # CAST fails: a dead letter of its own
    events[202] = event(202, user_id="3e400")  # a double of infinity: not what the decoder stages
    values = [json.dumps(e).encode() for e in events]
    values[50] = b"{not json"  # the decoder's dead letter, as without a statement
    sent = produce(env.kafka, env.topic, [(f"k{i}".encode(), v) for i, v in enumerate(values)])
    where = {i: (p, o) for i, (p, o) in enumerate(sent)}

    results = env.ingest_all()
    assert all(r.returncode == 0 for r in results), results[-1].stdout[-3000:]

    failed = {101, 202}
    filtered = {i for i in range(300) if i % 7 == 0 and i not in failed and i != 50}
    rows = env.query(
        sql.SQL("SELECT source_partition, source_offset, event_id, user_id, amount FROM {}").format(env.table)
    )
    expected = {(*where[i], f"E{i}", str(i), i * 2 + 0.25) for i in range(300) if i not in failed | filtered | {50}}
    assert sorted(rows) == sorted(expected)

    dead = {(p, o): (cls, msg, key, value) for p, o, cls, msg, key, value, _ in env.dead_letters()}
    assert set(dead) == {where[i] for i in (50, 101, 202)}
    assert dead[where[50]][0] == "invalid_json"
    for i, says in ((101, "CAST_INVALID_INPUT"), (202, "transform_sql gave amount a number that is not finite")):
        error_class, message, key, value = dead[where[i]]
        assert error_class == "sql_failed" and says in message, message
        assert (bytes(key), bytes(value)) == (f"k{i}".encode(), values[i]), "the dead letter keeps the record whole"

    counted = env.query(
        "SELECT sum(records_read), sum(rows_written), sum(dead_letters), sum(filtered), string_agg(note, ' | ') "
        "FROM microingest.batches WHERE pipeline = %s AND kind = 'ingest'",
        (env.pipeline.name,),
    )[0]
    assert counted[:4] == (300, len(expected), 3, len(filtered))
    assert f"{len(filtered)} record(s) filtered out by transform_sql" in counted[4]
    assert dict(env.ledger()) == {p: max(o for q, o in sent if q == p) + 1 for p, _ in sent}
    partition, offset = where[min(filtered)]
    [told] = story(offset_facts(env.pipeline, env.topic, partition, offset))[:1]
    assert f"filtered {len(filtered)} of its records out, this one among them" in told


def test_a_statement_spark_refuses_fails_the_run_and_writes_nothing(pg, kafka, tmp_path, monkeypatch):
    statement = f"SELECT {POSITION}, event_id, user_id, event_type, no_such_column AS amount, event_time FROM batch"
    env = own_env(pg, kafka, tmp_path, monkeypatch, transform_sql=statement)
    produce(env.kafka, env.topic, [(b"k", json.dumps(event(1)).encode())])

    from microingest.plan.live import plan_live_run

    result = env.spark_job(plan_live_run(env.pipeline))
    assert result.returncode != 0
    assert "TransformError" in result.stdout and "Spark refuses its transform_sql" in result.stdout
    assert "no_such_column" in result.stdout
    assert env.query(sql.SQL("SELECT count(*) FROM {}").format(env.table)) == [(0,)]
    assert env.batch_count() == 0


def test_a_statement_passing_the_batch_through_lands_what_the_decoder_alone_lands(pg, kafka, tmp_path, monkeypatch):
    """Differential: the typed rows through Spark SQL and back (`typed_rows`) against the decoder's own COPY rows, on
    values at the edges of each type, with tombstones, nulls and dead letters among them."""
    lenient = {"dead_letter": {"max_fraction": 0.5}}
    plain = own_env(pg, kafka, tmp_path, monkeypatch, **lenient)
    name, statement = f"{plain.pipeline.name}_sql", "SELECT * FROM batch"
    through = new_env(pg, kafka, plain.pipelines_dir, name, plain.topic, transform_sql=statement, **lenient)
    values = [
        {"event_id": "e0", "user_id": "", "event_type": "ünï ☃ 𝄞", "amount": -0.0, "event_time": 0},
        {"event_id": "e1", "user_id": None, "amount": 1.7976931348623157e308, "event_time": -62135596800000},
        {"event_id": "e2", "amount": 5e-324, "event_time": 253402300799999},
        {"event_id": "e3", "user_id": "line\nbreak\ttab\\slash", "amount": 12345678901234567890},
        {"event_id": "e4", "event_type": "x" * 5000, "amount": -1, "event_time": 1700000000123},
        {"user_id": "no event id"},  # a required field missing: the decoder's dead letter
    ]
    records = [(f"k{i}".encode(), json.dumps(v).encode()) for i, v in enumerate(values * 40)]
    records.append((b"tombstone", None))
    produce(plain.kafka, plain.topic, records)

    plain.ingest_all()
    through.ingest_all()

    columns = sql.SQL(
        "SELECT source_topic, source_partition, source_offset, kafka_timestamp, event_id, user_id, event_type, "
        "amount, event_time FROM {} ORDER BY 2, 3"
    )
    landed = plain.query(columns.format(plain.table))
    assert len(landed) == 5 * 40
    assert through.query(columns.format(through.table)) == landed
    assert [d[:4] for d in through.dead_letters()] == [d[:4] for d in plain.dead_letters()]


def test_a_statement_giving_null_for_a_required_field_makes_a_dead_letter_naming_it(pg, kafka, tmp_path, monkeypatch):
    """A try_cast that fails gives NULL; the required field's column is NOT NULL, so the row would refuse the batch
    at COPY on every run. The record is a sql_failed dead letter naming the field, and the rest land."""
    statement = (
        f"SELECT {POSITION}, try_cast(nullif(event_id, 'e3') AS STRING) AS event_id, user_id, event_type, amount, "
        "event_time FROM batch"
    )
    env = own_env(pg, kafka, tmp_path, monkeypatch, transform_sql=statement)
    values = [json.dumps(event(i)).encode() for i in range(10)]
    sent = produce(env.kafka, env.topic, [(f"k{i}".encode(), v) for i, v in enumerate(values)])

    env.ingest_all()

    rows = env.query(sql.SQL("SELECT source_partition, source_offset, event_id FROM {}").format(env.table))
    assert sorted(rows) == sorted((*sent[i], f"e{i}") for i in range(10) if i != 3)
    [(partition, offset, error_class, message, key, value, _)] = env.dead_letters()
    assert (partition, offset, error_class) == (*sent[3], "sql_failed")
    assert "transform_sql gave event_id NULL, but the field is required" in message, message
    assert (bytes(key), bytes(value)) == (b"k3", values[3])
    assert dict(env.ledger()) == {p: max(o for q, o in sent if q == p) + 1 for p, _ in sent}


def test_a_backfill_settles_the_positions_its_statement_filters_out(pg, kafka, tmp_path, monkeypatch):
    """A statement that now filters test events, replayed over positions already ingested, skipped by an operator,
    or filtered before: one already there counts as already there (skip_existing), a skip's dead letter there is
    resolved, and replace is refused only where the target still holds such a record."""
    from microingest.plan.backfill import plan_backfill
    from microingest.plan.request import SkipRequest, parse_request
    from microingest.plan.skip import plan_skip

    keeps_all = f"SELECT {POSITION}, event_id, user_id, event_type, amount, event_time FROM batch"
    env = own_env(pg, kafka, tmp_path, monkeypatch, transform_sql=keeps_all)
    values = [json.dumps(event(i, "test" if i % 5 == 0 else "click")).encode() for i in range(40)]
    env.send_to(0, [(b"k", v) for v in values[:20]])
    env.ingest_all()  # offsets 0-19: every record a row
    env.send_to(0, [(b"k", v) for v in values[20:30]])
    skipped = env.spark_job(plan_skip(env.pipeline, SkipRequest(0, 30, "incident"), "on-call"))
    assert skipped.returncode == 0, skipped.stdout[-3000:]  # offsets 20-29: skipped dead letters
    env.redeclare(transform_sql=STATEMENT)  # test events filtered out from now on
    env.send_to(0, [(b"k", v) for v in values[30:]])
    env.ingest_all()  # offsets 30-39: 30 and 35 filtered, never held

    def backfill(lo: int, hi: int, overlap: str, run_id: str):
        request = parse_request({"backfill_ranges": {"0": [lo, hi]}, "overlap": overlap}, "manual")
        return env.spark_job(plan_backfill(env.pipeline, request), run=RunInfo("microingest_test", run_id))

    refused = backfill(0, 20, "replace", "replace_held")
    assert refused.returncode != 0 and "OverlapError" in refused.stdout and "4 record(s)" in refused.stdout
    replaced = backfill(30, 40, "replace", "replace_free")
    assert replaced.returncode == 0, replaced.stdout[-3000:]
    settled = backfill(0, 30, "skip_existing", "settle")
    assert settled.returncode == 0, settled.stdout[-3000:]
    assert '"records_read": 30, "rows_written": 8, "dead_letters": 0, "skipped": 20' in settled.stdout

    rows = env.query(sql.SQL("SELECT source_offset FROM {} ORDER BY 1").format(env.table))
    assert [o for (o,) in rows] == [*range(20), *(o for o in range(20, 40) if o % 5)]
    assert env.dead_letters() == [], "the skip's dead letters are resolved, filtered ones too"
    history = env.query(
        "SELECT run_id, filtered, note FROM microingest.batches WHERE pipeline = %s AND kind = 'backfill' "
        "ORDER BY committed_at",
        (env.pipeline.name,),
    )
    assert [(r, f) for r, f, _ in history] == [("replace_free", 2), ("settle", 2)]
    assert "resolved 10 skipped position(s)" in history[1][2]
