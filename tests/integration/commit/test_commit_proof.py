"""What the commit transaction proves and how long it may wait, driven directly against Postgres with batches decoded
as the executors decode them: a read that does not match the plan is refused before anything is written, a held
pipeline lock times out, the history's commit time is when the write ended, and a merge stages inside the
transaction only."""

import time
import uuid
from datetime import datetime, timezone

import psycopg2
import pyarrow as pa
import pytest
from psycopg2 import sql

from helpers.hostile_records import kafka_batch
from microingest.batches import Batch, OffsetRange, RunInfo
from microingest.commit.copy_commit import DecodedBatch, commit_decoded
from microingest.commit.ledger import lock_pipeline
from microingest.commit.read_proof import ReadMismatchError
from microingest.commit.sinks import sink_for
from microingest.commit.transaction import CommitTimeoutError
from microingest.errors import REFUSED_EXIT
from microingest.plan.live import plan_next_batch
from microingest.spark.decoder import Decoder, collected


def decoded(env, *chunks, into_target: bool = True) -> DecodedBatch:
    """What the driver collects when executors decode these chunks (each a list of partition 0 offsets, one Spark
    partition each); offsets in `BAD` hold a value that is not JSON, so they become dead letters."""
    decoder = Decoder(env.pipeline, str(uuid.uuid4()), None, into_target)
    parts = []
    for offsets in chunks:
        records = [(f"k{o}".encode(), b"not json" if o in BAD else b'{"event_id": "e%d"}' % o) for o in offsets]
        parts.extend(decoder(iter([kafka_batch(env.topic, 0, offsets, records)])))
    return collected([pa.Table.from_batches(parts)], decoder, datetime.now(timezone.utc))


BAD = {3, 13}


def planned(env, until: int) -> Batch:
    """A live batch of partition 0's offsets [0, until)."""
    return Batch("ingest", (OffsetRange(env.topic, 0, 0, until, None),))


def commit(env, batch: Batch, read: DecodedBatch, conn=None):
    own = conn is None
    conn = conn or psycopg2.connect(**env.pg)
    try:
        conn.autocommit = True
        return commit_decoded(conn, sink_for(env.pipeline), batch, read, RunInfo())
    finally:
        if own:
            conn.close()


def nothing_written(env) -> bool:
    return env.target_rows() == [] and env.ledger() == {} and env.batches() == [] and env.dead_letters() == []


def test_a_decoded_batch_lands_its_rows_and_dead_letters_once_with_the_ledger(env):
    result = commit(env, planned(env, 20), decoded(env, range(0, 10), range(10, 20)))
    assert (result.rows_written, result.dead_letters, result.records_read) == (18, 2, 20)
    assert [o for _, o, _ in env.target_rows()] == [o for o in range(20) if o not in BAD]
    assert sorted(d[1] for d in env.dead_letters()) == sorted(BAD) and env.ledger() == {0: 20}


@pytest.mark.parametrize(
    "chunks, until, refusal",
    [
        ((range(10),), 5, r"outside the planned ranges \(e.g. it-\w+\[0\] offsets 0..9 \(10 records\)\)"),
        (
            (range(0, 6), range(5, 10)),
            10,
            r"positions read twice \(it-\w+\[0\] offsets 0..5 \(6 records\) and "
            r"it-\w+\[0\] offsets 5..9",
        ),
        (([2, 3, 2],), 5, r"positions read twice"),
    ],
)
def test_a_read_that_does_not_match_the_plan_is_refused_and_writes_nothing(env, chunks, until, refusal):
    """The counts agree in every case; only the positions show that the read went wrong."""
    with pytest.raises(ReadMismatchError, match=refusal):
        commit(env, planned(env, until), decoded(env, *chunks))
    assert nothing_written(env)


def test_a_held_pipeline_lock_times_out_the_commit_which_succeeds_once_it_is_free(env, monkeypatch):
    monkeypatch.setenv("MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS", "1.5")
    read = decoded(env, range(5))
    holder = psycopg2.connect(**env.pg)
    try:
        with holder.cursor() as cur:
            lock_pipeline(cur, env.pipeline.name)  # e.g. a session stuck inside another commit
        started = time.monotonic()
        with pytest.raises(CommitTimeoutError, match="gave up waiting for the pipeline lock"):
            commit(env, planned(env, 5), read)
        assert time.monotonic() - started < 60
        assert nothing_written(env)
        holder.rollback()
        commit(env, planned(env, 5), read)
    finally:
        holder.close()
    assert [o for _, o, _ in env.target_rows()] == [0, 1, 2, 4] and env.ledger() == {0: 5}


def test_the_history_commit_time_is_when_the_write_ended(env):
    env.query_commit(
        f"CREATE FUNCTION {env.pipeline.name}_slow() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$"
    )
    env.query_commit(
        f"CREATE TRIGGER slow AFTER INSERT ON {env.pipeline.target_table} FOR EACH STATEMENT "
        f"EXECUTE FUNCTION {env.pipeline.name}_slow()"
    )
    commit(env, planned(env, 3), decoded(env, range(3)))
    [(publish,)] = env.query(
        "SELECT extract(epoch FROM committed_at - staged_at) FROM microingest.batches WHERE pipeline = %s",
        (env.pipeline.name,),
    )
    assert publish >= 1.0, "committed_at must come after the 1 s the write took"


def test_a_merge_stages_inside_its_transaction_and_leaves_no_table_behind(env):
    """A backfill (like an upsert or aggregate target) COPYs into tables of its transaction's own, then publishes."""
    commit(env, planned(env, 10), decoded(env, range(0, 10)))
    backfill = Batch("backfill", (OffsetRange(env.topic, 0, 0, 10, None),), overlap="replace")
    conn = psycopg2.connect(**env.pg)
    try:
        result = commit(env, backfill, decoded(env, range(0, 10), into_target=False), conn)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM pg_class WHERE relname LIKE 'microingest_staged_%%' AND relpersistence = 't'"
            )
            assert cur.fetchone() == (0,)
    finally:
        conn.close()
    assert (result.rows_written, result.dead_letters) == (9, 1)
    assert [o for _, o, _ in env.target_rows()] == [o for o in range(10) if o not in BAD]
    assert [d[1] for d in env.dead_letters()] == [3] and env.ledger() == {0: 10}


def test_rows_the_target_refuses_are_refused_not_retried(env):
    """A CHECK the rows violate refuses them on every try: the job exits as refused (the task fails without spending
    its retries), names the constraint, and writes nothing."""
    env.query_commit(sql.SQL("ALTER TABLE {} ADD CONSTRAINT amount_below_ten CHECK (amount < 10)").format(env.table))
    env.produce(100)  # amounts 0 to 24.75
    result = env.spark_job(list(plan_next_batch(env.pipeline).ranges))
    assert result.returncode == REFUSED_EXIT, result.stdout[-3000:]
    assert "TargetError" in result.stdout and "amount_below_ten" in result.stdout, result.stdout[-3000:]
    assert nothing_written(env)
