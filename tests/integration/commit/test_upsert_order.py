"""upsert_latest orders each key's records totally, so its final row does not depend on where batches were cut: a
property test over random records (CreateTime going backwards inside partitions, equal and missing timestamps,
tombstones, a key in two topics) published through the sink on the real Postgres in random cuts, with replays,
against a model of the documented order. No Kafka or Spark: the claim is the sink's SQL."""

import random
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from psycopg2 import sql

from microingest.commit.sinks import UpsertLatestSink
from microingest.declare.identifiers import table_identifier
from microingest.declare.validate import parse_pipeline
from microingest.systems.postgres import connection

EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)
PARTITIONS = [("orders-eu", 0), ("orders-eu", 1), ("orders-us", 0)]


class Record:
    def __init__(self, key: str, topic: str, partition: int, offset: int, ts: int | None, value: str | None):
        self.key, self.topic, self.partition, self.offset, self.ts, self.value = (
            key,
            topic,
            partition,
            offset,
            ts,
            value,
        )

    def staged(self, batch_id: str) -> tuple:
        at = None if self.ts is None else EPOCH + timedelta(seconds=self.ts)
        position = (self.topic, self.partition, self.offset)
        return (*position, at, batch_id, self.key, self.value is None, self.value)


def expected(records: list[Record]) -> dict[str, str]:
    """The documented order: a key's clock is the latest Kafka timestamp of its records in its partition up to each
    one; its newest record is the greatest (clock, topic, partition, offset); a tombstone leaves no row."""
    clocks, running = {}, {}
    for r in sorted(records, key=lambda r: (r.topic, r.partition, r.offset)):
        where = (r.key, r.topic, r.partition)
        running[where] = max(running.get(where, float("-inf")), float("-inf") if r.ts is None else r.ts)
        clocks[id(r)] = running[where]
    newest: dict[str, Record] = {}
    for r in records:
        order = (clocks[id(r)], r.topic, r.partition, r.offset)
        held = newest.get(r.key)
        if held is None or order > (clocks[id(held)], held.topic, held.partition, held.offset):
            newest[r.key] = r
    return {k: r.value for k, r in newest.items() if r.value is not None}


def generated(rnd: random.Random) -> list[Record]:
    records, offsets = [], dict.fromkeys(PARTITIONS, 0)
    for _ in range(rnd.randint(1, 24)):
        topic, partition = rnd.choice(PARTITIONS)
        offset = offsets[(topic, partition)] = offsets[(topic, partition)] + rnd.randint(1, 3)
        ts = rnd.choice([None, *range(1, 6)])  # few values: ties, and times that go backwards in a partition
        value = None if rnd.random() < 0.2 else f"v{len(records)}"
        records.append(Record(rnd.choice("ABC"), topic, partition, offset, ts, value))
    return records


def cut(records: list[Record], rnd: random.Random) -> list[list[Record]]:
    """Live batches: each partition read in offset order, in pieces, the pieces of several partitions interleaved
    and grouped into batches at random."""
    left = {p: sorted((r for r in records if (r.topic, r.partition) == p), key=lambda r: r.offset) for p in PARTITIONS}
    pieces = []
    while any(left.values()):
        p = rnd.choice([p for p, rs in left.items() if rs])
        take = rnd.randint(1, 3)
        pieces.append(left[p][:take])
        left[p] = left[p][take:]
    batches: list[list[Record]] = [[]]
    for piece in pieces:
        if batches[-1] and rnd.random() < 0.5:
            batches.append([])
        batches[-1].extend(piece)
    return batches


@pytest.fixture
def sink(pg):
    name = f"it_order_{uuid.uuid4().hex[:10]}"
    pipeline = parse_pipeline(
        {
            "name": name,
            "topics": sorted({t for t, _ in PARTITIONS}),
            "target_table": f"public.{name}",
            "sink_mode": "upsert_latest",
            "schema": {"v": "string"},
        }
    )
    with connection(pg) as conn, conn, conn.cursor() as cur:
        cur.execute(
            sql.SQL(
                "CREATE TABLE {} (record_key text PRIMARY KEY, source_topic text NOT NULL, source_partition integer "
                "NOT NULL, source_offset bigint NOT NULL, kafka_timestamp timestamptz, batch_id uuid NOT NULL, v text)"
            ).format(table_identifier(pipeline.target_table))
        )
    return UpsertLatestSink(pipeline)


def published(pg, sink: UpsertLatestSink, batches: list[list[Record]]) -> dict[str, str]:
    """Each batch staged and published in a transaction of its own, as a commit does; returns the target's rows."""
    name = sink.pipeline.name
    with connection(pg) as conn:
        with conn, conn.cursor() as cur:
            cur.execute(sql.SQL("TRUNCATE {}").format(sink.target))
            for table in (sink.TOMBSTONES, sink.CLOCKS):
                cur.execute(sql.SQL("DELETE FROM {} WHERE pipeline = %s").format(table), (name,))
        for batch in batches:
            batch_id = str(uuid.uuid4())
            with conn, conn.cursor() as cur:
                sink.create_staging(cur)
                columns = sql.SQL(", ").join(map(sql.Identifier, sink.staging_columns))
                cur.executemany(
                    sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                        sink.staging, columns, sql.SQL(", ").join(sql.Placeholder() * len(sink.staging_columns))
                    ),
                    [r.staged(batch_id) for r in batch],
                )
                sink.publish(cur, batch_id)
        with conn.cursor() as cur:
            cur.execute(sql.SQL("SELECT record_key, v FROM {}").format(sink.target))
            return dict(cur.fetchall())


def test_the_issues_example_ends_on_the_same_row_in_one_batch_or_two(pg, sink):
    """CreateTime going backwards on orders-eu[0] (A@10 at t3, then A@11 at t1) and the key on orders-us too
    (B@5 at t2): the newest is A@11 (its clock is t3, A@10's), in one batch or cut {A@10}, {A@11, B@5}."""
    a10 = Record("K", "orders-eu", 0, 10, 3, "v1")
    a11 = Record("K", "orders-eu", 0, 11, 1, "v3")
    b5 = Record("K", "orders-us", 0, 5, 2, "v2")
    assert expected([a10, a11, b5]) == {"K": "v3"}
    assert published(pg, sink, [[a10, a11, b5]]) == {"K": "v3"}
    assert published(pg, sink, [[a10], [a11, b5]]) == {"K": "v3"}
    assert published(pg, sink, [[b5], [a10], [a11]]) == {"K": "v3"}
    gone = Record("K", "orders-us", 0, 6, 2, None)  # a tombstone older than A@11's clock: A@11 stays
    assert published(pg, sink, [[a10], [a11, b5, gone]]) == published(pg, sink, [[a10, a11], [b5, gone]]) == {"K": "v3"}


@pytest.mark.parametrize("seed", range(8))
def test_a_keys_final_row_is_the_same_however_batches_were_cut_and_replayed(pg, sink, seed):
    rnd = random.Random(seed)
    for _ in range(15):
        records = generated(rnd)
        want = expected(records)
        assert published(pg, sink, [records]) == want, "one batch"
        batches = cut(records, rnd)
        assert published(pg, sink, batches) == want, "cut into batches"
        replayed = batches + [rnd.choice(batches) for _ in range(2)]  # a retry, a backfill replaying a batch
        assert published(pg, sink, replayed) == want, "batches replayed"
