"""What the fault-injection runs (`make chaos`, the soak) write and how they check it: a producer of keyed events with
undecodable values and tombstones among them, one pipeline per sink mode on its topic, and the comparison of every
target with the topic read back from Kafka, which finds a record lost or landed twice in any sink mode."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kafka import KafkaProducer

from helpers.pipeline_env import UPSERT_TARGET, Env, new_env

DEVICES = 12
BAD_VALUE = b"{not json"


class Producer(threading.Thread):
    """Writes keyed events, 40 a second (about 3% undecodable, 1% tombstones), until stopped."""

    def __init__(self, kafka: dict, topic: str, seed: int):
        super().__init__(daemon=True)
        self.kafka, self.topic, self.rnd = kafka, topic, random.Random(seed)
        self.stopping = threading.Event()
        self.sent = 0
        self.errors = 0

    def run(self) -> None:
        producer = KafkaProducer(
            **self.kafka,
            acks="all",
            enable_idempotence=True,
            linger_ms=5,
            request_timeout_ms=5000,
            delivery_timeout_ms=60000,
        )
        n = 0
        while not self.stopping.is_set():
            for _ in range(40):
                device = f"device-{self.rnd.randrange(DEVICES)}"
                roll = self.rnd.random()
                if roll < 0.03:
                    value = BAD_VALUE
                elif roll < 0.04:
                    value = None
                else:
                    value = json.dumps(
                        {
                            "event_id": f"e{n}",
                            "user_id": device,
                            "amount": float(n % 17),
                            "event_time": int(time.time() * 1000),
                        }
                    ).encode()
                try:
                    producer.send(self.topic, key=device.encode(), value=value)
                    self.sent += 1
                except Exception:
                    self.errors += 1  # the broker is being restarted; Kafka's own log is the truth, read back later
                n += 1
            time.sleep(1)
        try:
            producer.flush(timeout=60)
        finally:
            producer.close(timeout=10)


@dataclass
class SinkPipelines:
    """One pipeline per sink mode on one topic, each with its own ledger; `unkeyed` appends into a table without a
    key, so that a record published twice stays there twice for the check to find (the append target's key on the
    source position would reject it first)."""

    append: Env
    unkeyed: Env
    upsert: Env
    aggregate: Env

    def all(self) -> list[Env]:
        return [self.append, self.unkeyed, self.upsert, self.aggregate]


def declare_sink_pipelines(
    pg, kafka, folder: Path, prefix: str, topic: str, common: dict, per_role: dict[str, dict] | None = None
) -> SinkPipelines:
    """The four pipelines, declared in folder as <prefix>_<role>; per_role adds settings to one of them."""
    extra = per_role or {}

    def declare(role: str, **declaration) -> Env:
        return new_env(pg, kafka, folder, f"{prefix}_{role}", topic, **{**common, **declaration, **extra.get(role, {})})

    append, unkeyed = declare("append"), declare("nokey")
    unkeyed.replace_target(
        "source_topic text, source_partition integer, source_offset bigint, kafka_timestamp "
        "timestamptz, batch_id uuid, event_id text, user_id text, event_type text, amount double "
        "precision, event_time timestamptz"
    )
    upsert = declare("upsert", sink_mode="upsert_latest")
    upsert.replace_target(UPSERT_TARGET)
    aggregate = declare(
        "agg",
        sink_mode="aggregate",
        schema={
            "event_id": {"type": "string", "required": True},
            "user_id": {"type": "string", "required": True},
            "amount": "double",
        },
        aggregate={"group_by": ["user_id"], "measures": {"events": "count", "amount_total": {"sum": "amount"}}},
    )
    aggregate.replace_target("user_id text PRIMARY KEY, events bigint NOT NULL, amount_total double precision NOT NULL")
    return SinkPipelines(append, unkeyed, upsert, aggregate)


def verify_topics(env: Env, truths: dict[str, list]) -> dict:
    """An append pipeline reading several topics against each topic read back: rows and dead letters as multisets of
    (topic, partition, offset, event or raw value), so a record lost, landed twice or under another topic shows."""
    expected_rows, expected_dead = Counter(), Counter()
    for topic, truth in truths.items():
        for p, o, _, v, _ in truth:
            if v in (None, BAD_VALUE):
                expected_dead[(topic, p, o, v)] += 1
            else:
                expected_rows[(topic, p, o, json.loads(v)["event_id"])] += 1
    rows = Counter(
        env.query(f"SELECT source_topic, source_partition, source_offset, event_id FROM {env.pipeline.target_table}")
    )
    dead = Counter(
        (t, p, o, None if v is None else bytes(v))
        for t, p, o, v in env.query(
            'SELECT topic, partition, "offset", record_value FROM microingest.dead_letters WHERE pipeline = %s',
            (env.pipeline.name,),
        )
    )
    lost_rows, extra_rows = differences(rows, expected_rows)
    lost_dead, extra_dead = differences(dead, expected_dead)
    return {
        "topics": sorted(truths),
        "landed_rows": sum(rows.values()),
        "dead_letters": sum(dead.values()),
        "lost": lost_rows + lost_dead,
        "duplicated": extra_rows + extra_dead,
    }


def differences(landed: Counter, expected: Counter) -> tuple[int, int]:
    """(lost, duplicated) between two multisets: what is missing, and every extra copy or unknown entry."""
    return sum((expected - landed).values()), sum((landed - expected).values())


def verify(sinks: SinkPipelines, truth, more_appends: tuple[Env, ...] = ()) -> dict:
    """Each target against the topic read back, without relying on any key of the targets: append targets and dead
    letters as multisets of (partition, offset, event or raw value), upsert as the last value per key, aggregate as
    totals (which a record counted twice would inflate)."""
    good = [(p, o, k, v) for p, o, k, v, _ in truth if v not in (None, BAD_VALUE)]
    expected_rows = Counter((p, o, json.loads(v)["event_id"]) for p, o, _, v in good)
    expected_dead = Counter((p, o, v) for p, o, _, v, _ in truth if v in (None, BAD_VALUE))
    appends, upsert, aggregate = [sinks.append, sinks.unkeyed, *more_appends], sinks.upsert, sinks.aggregate
    lost = duplicated = rows = dead = 0
    for env in appends:
        landed = Counter(env.target_rows())
        landed_dead = Counter((p, o, None if v is None else bytes(v)) for p, o, _, _, _, v, _ in env.dead_letters())
        for got, want in ((landed, expected_rows), (landed_dead, expected_dead)):
            missing, extra = differences(got, want)
            lost, duplicated = lost + missing, duplicated + extra
        rows, dead = rows + sum(landed.values()), dead + sum(landed_dead.values())

    latest: dict[str, tuple] = {}
    for p, o, k, v, _ in sorted(truth, key=lambda r: (r[0], r[1])):
        if v is None:
            latest.pop(k.decode(), None)
        elif v != BAD_VALUE:
            latest[k.decode()] = (json.loads(v)["event_id"], p, o)
    state = {
        k: (e, p, o)
        for k, e, p, o in upsert.query(
            f"SELECT record_key, event_id, source_partition, source_offset FROM {upsert.pipeline.target_table}"
        )
    }
    assert state == latest, "upsert_latest holds the last value of every key"
    assert {(p, o) for p, o, *_ in upsert.dead_letters()} == {(p, o) for p, o, _, v, _ in truth if v == BAD_VALUE}

    totals = defaultdict(lambda: [0, 0.0])
    for _, _, _, v in good:
        doc = json.loads(v)
        totals[doc["user_id"]][0] += 1
        totals[doc["user_id"]][1] += doc["amount"]
    table = {
        u: [e, a]
        for u, e, a in aggregate.query(f"SELECT user_id, events, amount_total FROM {aggregate.pipeline.target_table}")
    }
    assert table == {u: [c, s] for u, (c, s) in totals.items()}, "aggregate totals: any duplicate would inflate them"

    return {
        "produced": len(truth),
        "append_targets": len(appends),
        "landed_rows": rows,
        "dead_letters": dead,
        "lost": lost,
        "duplicated": duplicated,
        "upsert_keys": len(state),
        "aggregate_events": sum(e for e, _ in table.values()),
        "finished_at": datetime.now(timezone.utc).isoformat(),
    }
