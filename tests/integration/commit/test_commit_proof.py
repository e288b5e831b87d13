"""What the commit transaction proves and how long it may wait, driven directly against Postgres: staging that does
not match the plan is refused, a held pipeline lock times out, the history's commit time is when the publish ended,
and discarding an attempt waits for a straggling executor so none of its rows stay behind."""

import threading
import time
from datetime import datetime, timezone

import psycopg2
import pytest
from psycopg2 import sql

from hostile_records import kafka_batch
from microingest.commit.history import RunInfo
from microingest.commit.ledger import lock_pipeline
from microingest.commit.sinks import sink_for
from microingest.commit.staging import BatchAttempt, StagedCounts, stage_part
from microingest.commit.transaction import CommitTimeoutError, StagingMismatchError, commit_batch
from microingest.decode.codec import copy_text_row
from microingest.decode.records import RecordProcessor
from microingest.decode.staged_rows import csv_bytes, stage_batch
from microingest.errors import REFUSED_EXIT, TRANSIENT_EXIT
from microingest.plan.live import plan_next_batch
from microingest.plan.offsets import Batch, OffsetRange


def staged_attempt(env, positions, dead=()) -> tuple[BatchAttempt, StagedCounts]:
    """An open batch attempt with rows staged at `positions` of partition 0 and dead letters at `dead`."""
    attempt = BatchAttempt(env.pg, env.pipeline).open()
    return attempt, stage(env, attempt, positions, dead)


def stage(env, attempt: BatchAttempt, positions, dead=()) -> StagedCounts:
    """What one Spark task does: stage rows at `positions` and dead letters at `dead` of partition 0."""
    batch = kafka_batch(env.pipeline.topic, 0, positions, [(f"k{o}".encode(), b'{"event_id": "e%d"}' % o)
                                                           for o in positions])
    rows = csv_bytes(stage_batch(batch, RecordProcessor(env.pipeline), attempt.batch_id).rows)
    letters = "".join(copy_text_row((attempt.batch_id, env.pipeline.topic, 0, o, None, None, b"x", None, "bad_json",
                                     "not JSON")) for o in dead)
    first = (env.pipeline.topic, 0, min([*positions, *dead])) if [*positions, *dead] else None

    def decode(rows_out, dead_out) -> StagedCounts:
        rows_out.write(rows)
        dead_out.write(letters)
        return StagedCounts(len(positions), len(dead))

    return stage_part(env.pg, env.pipeline, attempt.batch_id, first, decode)


def planned(env, until: int) -> Batch:
    """A live batch of partition 0's offsets [0, until)."""
    return Batch("ingest", (OffsetRange(env.pipeline.topic, 0, 0, until, None),))


def nothing_written(env) -> bool:
    return env.target_rows() == [] and env.ledger() == {} and env.batches() == []


@pytest.mark.parametrize("positions, dead, until, refusal", [
    (range(10), (), 5, r"5 staged record\(s\) lie outside the planned ranges \(e.g. it-\w+\[0\]@5\)"),
    (range(5), (3,), 5, r"\[0, 5\) yields 6 records for 5 offsets"),
])
def test_staging_that_does_not_match_the_plan_is_refused(env, positions, dead, until, refusal):
    """The executors' counts agree with staging in both cases; only the plan shows that the read went wrong."""
    attempt, counts = staged_attempt(env, positions, dead)
    try:
        with pytest.raises(StagingMismatchError, match=refusal):
            commit_batch(attempt, planned(env, until), counts, RunInfo())
    finally:
        attempt.close()
    assert nothing_written(env)


def test_a_record_staged_twice_is_refused_by_staging(env):
    """Two tasks whose records overlap (which Spark's split of the ranges never makes): the second one's staging
    transaction fails on the first record already there, and leaves nothing."""
    attempt, _ = staged_attempt(env, range(3, 8))
    try:
        with pytest.raises(psycopg2.errors.UniqueViolation, match=r"\(batch_id, source_partition, source_offset, "
                                                                  r"source_topic\)=\(\S+, 0, [34], it-"):
            stage(env, attempt, range(0, 5))
        assert env.staged_rows() == 5
    finally:
        attempt.close()


def test_a_retried_task_finds_its_records_staged_and_writes_nothing_twice(env):
    """A task's records are COPYed straight into staging, once: a re-run of the same task (Spark retries it when its
    executor is lost after staging, or runs a speculative copy) finds its first position staged and stages nothing.
    Here the first position is a dead letter."""
    attempt, counts = staged_attempt(env, range(1, 6), dead=(0,))
    try:
        assert stage(env, attempt, range(1, 6), dead=(0,)) == counts
        with attempt.conn.cursor() as cur:
            assert attempt.staged_by_range(cur, planned(env, 6).ranges).counts == StagedCounts(5, 1)
        commit_batch(attempt, planned(env, 6), counts, RunInfo())
    finally:
        attempt.close()
    assert [o for _, o, _ in env.target_rows()] == [1, 2, 3, 4, 5] and len(env.dead_letters()) == 1


def test_a_held_pipeline_lock_times_out_the_commit_which_succeeds_once_it_is_free(env, monkeypatch):
    monkeypatch.setenv("MICROINGEST_COMMIT_LOCK_TIMEOUT_SECONDS", "1.5")
    attempt, counts = staged_attempt(env, range(5))
    holder = psycopg2.connect(**env.pg)
    try:
        with holder.cursor() as cur:
            lock_pipeline(cur, env.pipeline.name)  # e.g. a session stuck inside another commit
        started = time.monotonic()
        with pytest.raises(CommitTimeoutError, match="gave up waiting for the pipeline lock"):
            commit_batch(attempt, planned(env, 5), counts, RunInfo())
        assert time.monotonic() - started < 60
        assert nothing_written(env)
        holder.rollback()
        commit_batch(attempt, planned(env, 5), counts, RunInfo())
    finally:
        holder.close()
        attempt.close()
    assert [o for _, o, _ in env.target_rows()] == list(range(5)) and env.ledger() == {0: 5}


def test_the_history_commit_time_is_when_the_publish_ended(env):
    env.query_commit(f"CREATE FUNCTION {env.pipeline.name}_slow() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$ BEGIN PERFORM pg_sleep(1); RETURN NULL; END $$")
    env.query_commit(f"CREATE TRIGGER slow AFTER INSERT ON {env.pipeline.target_table} FOR EACH STATEMENT "
                     f"EXECUTE FUNCTION {env.pipeline.name}_slow()")
    attempt, counts = staged_attempt(env, range(3))
    try:
        commit_batch(attempt, planned(env, 3), counts, RunInfo(), datetime.now(timezone.utc))
    finally:
        attempt.close()
    [(publish,)] = env.query("SELECT extract(epoch FROM committed_at - staged_at) FROM microingest.batches "
                             "WHERE pipeline = %s", (env.pipeline.name,))
    assert publish >= 1.0, "committed_at must come after the 1 s the publish took"


def test_discard_waits_for_a_straggling_executor_and_removes_its_rows_too(env):
    attempt, _ = staged_attempt(env, range(3))
    straggler = psycopg2.connect(**env.pg)
    try:
        with straggler.cursor() as cur:  # what stage_part does, held open: registry row FOR SHARE, rows inserted
            cur.execute("SELECT 1 FROM microingest.staging_batches WHERE batch_id = %s FOR SHARE", (attempt.batch_id,))
            cur.execute(f'INSERT INTO microingest_staging."{env.pipeline.name}" (source_topic, source_partition, '
                        "source_offset, batch_id, is_tombstone, event_id) VALUES (%s, 0, 99, %s, false, 'late')",
                        (env.pipeline.topic, attempt.batch_id))
        discarding = threading.Thread(target=attempt.discard)
        discarding.start()
        # Until the discard waits on the straggler: committed any sooner, the straggler would not be straggling.
        blocked = "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))"
        deadline = time.monotonic() + 60
        while env.query(blocked, (straggler.get_backend_pid(),))[0][0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert env.query(blocked, (straggler.get_backend_pid(),))[0][0] == 1, "the discard never waited"
        straggler.commit()
        discarding.join(30)
        assert not discarding.is_alive()
    finally:
        straggler.close()
        attempt.close()
    assert env.staged_rows() == 0 and env.staging_batches() == 0


def test_staging_files_shrink_to_nothing_after_a_commit_unless_another_attempt_is_staging(env):
    size = f"SELECT pg_relation_size('microingest_staging.\"{env.pipeline.name}\"')"
    other, _ = staged_attempt(env, range(100, 150))
    attempt, counts = staged_attempt(env, range(0, 1000))
    try:
        commit_batch(attempt, planned(env, 1000), counts, RunInfo())
        attempt.release_space()
        assert env.query(size)[0][0] > 0 and env.staged_rows() == 50, "the other attempt's rows stay"
        other.discard()
        attempt.release_space()
    finally:
        attempt.close()
        other.close()
    assert env.query(size) == [(0,)] and env.staged_rows() == 0


def test_staging_is_left_alone_when_its_lock_is_not_granted_at_once(env):
    attempt, counts = staged_attempt(env, range(0, 20))
    reader = psycopg2.connect(**env.pg)
    try:
        commit_batch(attempt, planned(env, 20), counts, RunInfo())
        with reader.cursor() as cur:  # e.g. someone reading staging while the commit finishes
            cur.execute(f'SELECT count(*) FROM microingest_staging."{env.pipeline.name}"')
        attempt.release_space()  # gives up after 200 ms and leaves the connection usable
        with attempt.conn.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
        reader.rollback()
        attempt.release_space()
    finally:
        reader.close()
        attempt.close()
    assert env.query(f"SELECT pg_relation_size('microingest_staging.\"{env.pipeline.name}\"')") == [(0,)]


def test_a_staging_index_made_topic_first_is_rebuilt_topic_last(env):
    """Staging made by an earlier version had its unique index topic first; opening an attempt rebuilds it."""
    BatchAttempt(env.pg, env.pipeline).open().close()
    index = f'microingest_staging."{env.pipeline.name}_position"'
    env.query_commit(f"DROP INDEX {index}")
    env.query_commit(f'CREATE UNIQUE INDEX "{env.pipeline.name}_position" ON microingest_staging."{env.pipeline.name}" '
                     "(batch_id, source_topic, source_partition, source_offset)")
    BatchAttempt(env.pg, env.pipeline).open().close()
    assert env.query("SELECT pg_get_indexdef(%s::regclass)", (index,))[0][0].endswith(
        "(batch_id, source_partition, source_offset, source_topic)")


def test_staging_emptied_under_a_surviving_session_is_retried_not_refused(env, tmp_path):
    """A failover (behind a pooler, say) can find staging empty while the driver's session lives on: the proof
    sees fewer records than were staged. That is lost staging, which a retry redoes, not a read that missed the
    plan, which a retry would repeat."""
    produced = env.produce(200)
    marker = tmp_path / "staged"
    proc = env.paused_job(list(plan_next_batch(env.pipeline).ranges), "after_stage", marker)
    env.query_commit(sql.SQL("TRUNCATE {}").format(sink_for(env.pipeline).staging))
    marker.unlink()
    out, _ = proc.communicate(timeout=300)

    assert proc.returncode == TRANSIENT_EXIT, out[-3000:]  # a retry, not a refusal
    assert "StagingLostError" in out and "a retry stages the batch again" in out, out[-3000:]
    assert env.target_rows() == [] and env.ledger() == {}
    env.ingest_all()
    assert env.target_rows() == sorted(produced)


def test_rows_the_target_refuses_are_refused_not_retried(env):
    """A CHECK the rows violate refuses them on every try: the job exits as refused (the task fails without spending
    its retries), names the constraint, and writes nothing."""
    env.query_commit(sql.SQL("ALTER TABLE {} ADD CONSTRAINT amount_below_ten CHECK (amount < 10)").format(env.table))
    env.produce(100)  # amounts 0 to 24.75
    result = env.spark_job(list(plan_next_batch(env.pipeline).ranges))
    assert result.returncode == REFUSED_EXIT, result.stdout[-3000:]
    assert "TargetError" in result.stdout and "amount_below_ten" in result.stdout, result.stdout[-3000:]
    assert nothing_written(env) and env.staged_rows() == 0
