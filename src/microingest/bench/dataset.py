"""The bench's data: deterministic JSON events of about 200 bytes (or the same as Avro: `avro_dataset`), spread
round-robin over a topic's partitions. Each event's time is ISO-8601 text, as most JSON producers write a time (with a
millisecond fraction and an offset of their zone: `ISO_OFFSETS`), or epoch milliseconds (`TIMESTAMPS`). A share of
the records (`MALFORMED_SHARE` by default, spread evenly) is malformed: cut off halfway, as a producer's bug or a torn
write leaves a value; every contender must keep them out of its target.

Every contender reads the same topic. Record i goes to partition i % P at offset i // P with Kafka timestamp
base + i ms, so the decoded rows (what the COPY limit loads) follow from i alone, without reading Kafka back. The base
is the dataset's creation time minus one ms per record: every timestamp is in the past, since a broker refuses
records more than `message.timestamp.after.max.ms` (an hour by default) ahead of its clock, and recent, since ones
older than the topic's retention (7 days by default) would be deleted at once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import IO, Any

from kafka import KafkaProducer

from microingest.decode.codec import copy_text_row
from microingest.systems.kafka_access import create_topic, partition_bounds

EVENT_TIME_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the first event's event_time
SCHEMA: dict[str, Any] = {  # as a declaration writes it: a type, or a mapping with one
    "event_id": {"type": "string", "required": True},
    "user_id": "string",
    "event_type": "string",
    "amount": "double",
    "event_time": "timestamp",
    "country": "string",
    "page": "string",
    "session_id": "string",
}
VALUE_COLUMNS = tuple(SCHEMA)
_TYPES = ("view", "click", "add_to_cart", "purchase")
_COUNTRIES = ("DE", "FR", "NL", "PL", "SE", "US", "BR", "JP")
COPY_BATCH_ID = "00000000-0000-0000-0000-00000000be4c"
TIMESTAMPS = ("iso", "epoch")  # how the events write event_time: ISO-8601 text, or epoch milliseconds
# The zones producers write times in, by record: the same instant, spelled at each offset.
ISO_OFFSETS = (timedelta(0), timedelta(hours=1), timedelta(hours=-5), timedelta(hours=5, minutes=30))


def event(i: int) -> dict[str, Any]:
    """Record i's event, its time as epoch milliseconds."""
    return {
        "event_id": f"ev-{i:012d}",
        "user_id": f"user-{i * 7919 % 100_003:06d}",
        "event_type": _TYPES[i % 4],
        "amount": round((i * 37 % 100_000) / 100, 2),
        "event_time": EVENT_TIME_MS + i,
        "country": _COUNTRIES[i % 8],
        "page": f"/catalog/item/{i * 31 % 50_000}?ref=campaign-{i % 97}",
        "session_id": f"{i * 2654435761 % 2**32:08x}-{i % 65_536:04x}-{i * 40503 % 2**32:08x}",
    }


def value_bytes(i: int) -> bytes:
    return json.dumps(event(i), separators=(",", ":")).encode()


def iso_value_bytes(i: int) -> bytes:
    """Record i's event with its time as ISO-8601 text: 2026-01-01T01:00:00.007+01:00 is the same instant as epoch
    millisecond 1767225600007."""
    e = event(i)
    e["event_time"] = iso_text(e["event_time"], ISO_OFFSETS[i % len(ISO_OFFSETS)])
    return json.dumps(e, separators=(",", ":")).encode()


def iso_text(epoch_ms: int, offset: timedelta) -> str:
    local = datetime.fromtimestamp(epoch_ms // 1000, timezone(offset))
    zone = local.strftime("%z")
    return (
        local.strftime("%Y-%m-%dT%H:%M:%S")
        + f".{epoch_ms % 1000:03d}"
        + ("Z" if not offset else f"{zone[:3]}:{zone[3:]}")
    )


VALUES = {"epoch": value_bytes, "iso": iso_value_bytes}
KINDS = ("json", "avro", "orders")  # a bench run's datasets: the events as JSON and as Avro, and orders (JSON)


def dataset_topic(topic: str, kind: str) -> str:
    """The topic of one of a run's datasets: the JSON events' is the run's own, each other's is named after it."""
    return topic if kind == "json" else f"{topic}-{kind}"


Headers = Callable[[int], list[tuple[str, bytes]]]
MALFORMED_SHARE = 0.004


def is_malformed(i: int, share: float) -> bool:
    """Whether record i is one of the malformed: evenly spread, so records 0..n-1 hold exactly `malformed_in(n)`."""
    return int((i + 1) * share) != int(i * share)


def malformed_in(records: int, share: float) -> int:
    return int(records * share)


def with_malformed(value: Callable[[int], bytes], share: float) -> Callable[[int], bytes]:
    """`value`, but a malformed record's is cut off halfway (not JSON; Avro that ends before its record does)."""
    if not share:
        return value

    def maybe_cut(i: int) -> bytes:
        whole = value(i)
        return whole[: len(whole) // 2] if is_malformed(i, share) else whole

    return maybe_cut


@dataclass(frozen=True)
class Dataset:
    topic: str
    partitions: int
    records: int  # records 0..records-1, the large run's data
    ends: dict[int, int]  # each partition's end offset after the large run's data
    base_ts_ms: int  # record i's Kafka timestamp is base_ts_ms + i
    value: Callable[[int], bytes] = field(default=value_bytes, compare=False)  # record i's value
    malformed_share: float = 0.0  # of the records, cut off halfway (`with_malformed`)
    headers: Headers | None = field(default=None, compare=False)  # record i's headers

    @property
    def record_bytes(self) -> float:
        return sum(len(self.value(i)) for i in range(min(self.records, 1000))) / min(self.records, 1000)

    def malformed(self, records: int) -> int:
        """How many of records 0..records-1 are malformed: dead letters, not rows."""
        return malformed_in(records, self.malformed_share)


def produce_range(
    kafka: dict[str, Any],
    topic: str,
    partitions: int,
    base_ts_ms: int,
    start: int,
    count: int,
    say: Callable[[str], None] = lambda m: None,
    value: Callable[[int], bytes] = value_bytes,
    headers: Headers | None = None,
) -> None:
    """Records start..start+count-1, each to its partition with its timestamp, acknowledged by all replicas.

    Raises on the first record the broker refused: the bench must not go on with a dataset that has holes."""
    producer = KafkaProducer(
        **kafka,
        acks="all",
        linger_ms=50,
        batch_size=512 * 1024,
        enable_idempotence=True,
        max_in_flight_requests_per_connection=5,
    )
    refused: list[Exception] = []  # per-record futures would hold millions of objects; one errback sees them all
    started, step = time.monotonic(), max(count // 10, 1)
    try:
        for i in range(start, start + count):
            producer.send(
                topic,
                key=f"ev-{i:012d}".encode(),
                value=value(i),
                headers=headers(i) if headers else None,
                partition=i % partitions,
                timestamp_ms=base_ts_ms + i,
            ).add_errback(refused.append)
            if (i - start + 1) % step == 0:
                _raise_refused(refused, topic)
                if count >= 100_000:
                    say(f"  produced {i - start + 1:,} of {count:,} records ({time.monotonic() - started:.0f}s)")
        producer.flush()
        _raise_refused(refused, topic)
    finally:
        producer.close()


def _raise_refused(refused: list[Exception], topic: str) -> None:
    if refused:
        raise RuntimeError(
            f"the broker refused {len(refused):,} record(s) of topic {topic}; the first: {refused[0]!r}"
        ) from refused[0]


def first_timestamp_ms(now_ms: int, records: int) -> int:
    """The dataset's base timestamp: record `records` (the first after the backlog) is stamped `now_ms`."""
    return now_ms - records


def create_dataset(
    kafka: dict[str, Any],
    topic: str,
    records: int,
    partitions: int,
    say: Callable[[str], None] = lambda m: None,
    value: Callable[[int], bytes] = value_bytes,
    malformed_share: float = 0.0,
    headers: Headers | None = None,
) -> Dataset:
    if not create_topic(kafka, topic, partitions):
        raise RuntimeError(f"topic {topic} exists already; the bench needs a fresh one")
    base_ts_ms = first_timestamp_ms(int(time.time() * 1000), records)
    value = with_malformed(value, malformed_share)
    produce_range(kafka, topic, partitions, base_ts_ms, 0, records, say, value, headers)
    _, ends = partition_bounds(kafka, topic)
    expected = {p: len(range(p, records, partitions)) for p in range(partitions)}
    if ends != expected:
        raise RuntimeError(
            f"topic {topic} holds end offsets {ends}, expected {expected}: was it written to by something else?"
        )
    return Dataset(topic, partitions, records, ends, base_ts_ms, value, malformed_share, headers)


def write_copy_rows(dataset: Dataset, out: IO[str]) -> None:
    """The large run's well-formed records decoded into the target's layout, in COPY text format (what the COPY limit
    loads)."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    for i in range(dataset.records):
        if is_malformed(i, dataset.malformed_share):
            continue
        e = event(i)
        out.write(
            copy_text_row(
                (
                    dataset.topic,
                    i % dataset.partitions,
                    i // dataset.partitions,
                    epoch + timedelta(milliseconds=dataset.base_ts_ms + i),
                    COPY_BATCH_ID,
                )
                + tuple(e[c] if c != "event_time" else epoch + timedelta(milliseconds=e[c]) for c in VALUE_COLUMNS)
            )
        )
