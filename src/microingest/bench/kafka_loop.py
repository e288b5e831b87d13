"""Contender: the consumer loop a user writes without this platform. kafka-python → json → psycopg2 COPY, with each
batch's rows and the consumed offsets committed in one Postgres transaction (so it is exactly once too), in one
Python process. A value that is not JSON goes to the loop's dead-letter table with its reason, in the same
transaction. It stops when every partition reached the given end offsets, and prints the records it consumed, when
it finished and its own peak RSS (a few hundred records take it less than the bench's memory sampler's interval).

Two ways to write a row: the plain one converts both timestamps with `datetime` per record; `--lean`, as a user
tuning it would, formats each second once and adds the milliseconds, passes ISO-8601 text on to Postgres as it is
(COPY reads it), and escapes only text that needs it.

    python -m microingest.bench.kafka_loop --topic T --table bench.kafka_loop --until '{"0": 1000}' --name M [--lean]
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from decimal import Decimal

import psycopg2
from kafka import KafkaConsumer, TopicPartition

from microingest.bench.dataset import VALUE_COLUMNS
from microingest.systems.connections import get_connection, kafka_python_config, postgres_params


def _text(v) -> str:
    if v is None:
        return r"\N"
    s = str(v)
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def row(msg, batch_id: str) -> str:
    doc = json.loads(msg.value)
    ts = datetime.fromtimestamp(msg.timestamp / 1000, timezone.utc).isoformat()
    values = [doc.get(c) for c in VALUE_COLUMNS]
    at = doc["event_time"]
    values[VALUE_COLUMNS.index("event_time")] = (
        datetime.fromisoformat(at) if isinstance(at, str) else datetime.fromtimestamp(at / 1000, timezone.utc)
    ).isoformat()
    return "\t".join([msg.topic, str(msg.partition), str(msg.offset), ts, batch_id] + [_text(v) for v in values]) + "\n"


class _Clock:
    """Epoch milliseconds → COPY text of a timestamptz, each second formatted once (the records come in order)."""

    def __init__(self):
        self.second, self.text = None, ""

    def __call__(self, ms: int) -> str:
        second, millis = divmod(ms, 1000)
        if second != self.second:
            self.second = second
            self.text = datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        return f"{self.text}.{millis:03d}+00"


_NEEDS_ESCAPE = re.compile(r"[\\\t\n\r]").search
_EVENT_TIME = VALUE_COLUMNS.index("event_time")


def _lean_line(msg, batch_id: str, kafka_clock: _Clock, values) -> str:
    """A lean loop's COPY text line: the record's position and Kafka time, the batch, then the values, text escaped
    only when it needs it."""
    cells = [r"\N" if v is None else _text(v) if type(v) is str and _NEEDS_ESCAPE(v) else str(v) for v in values]
    return (
        "\t".join([msg.topic, str(msg.partition), str(msg.offset), kafka_clock(msg.timestamp), batch_id] + cells) + "\n"
    )


def lean_rows() -> Callable:
    kafka_clock, event_clock = _Clock(), _Clock()

    def lean_row(msg, batch_id: str) -> str:
        doc = json.loads(msg.value)
        values = [doc.get(c) for c in VALUE_COLUMNS]
        if type(values[_EVENT_TIME]) is int:
            values[_EVENT_TIME] = event_clock(values[_EVENT_TIME])
        return _lean_line(msg, batch_id, kafka_clock, values)

    return lean_row


def dead_table(table: str) -> str:
    return f"{table}_dead"


def lean_order_rows() -> Callable:
    """Orders (bench.orders_dataset) as the issue's hand loop reads them: money through Decimal, arrays as array
    literals and the attributes as JSON text, all handed to COPY as text."""
    kafka_clock = _Clock()

    def order_row(msg, batch_id: str) -> str:
        doc = json.loads(msg.value, parse_float=Decimal)
        customer = doc.get("customer") or {}
        skus, prices, attributes = doc.get("skus"), doc.get("item_prices"), doc.get("attributes")
        trace = next((v for k, v in reversed(msg.headers or []) if k == "trace-id"), None)
        values = (
            doc.get("order_id"),
            doc.get("placed_at"),
            doc.get("total"),
            doc.get("currency"),
            doc.get("shipped_on"),
            customer.get("id"),
            customer.get("tier"),
            None if skus is None else "{" + ",".join(f'"{s}"' for s in skus) + "}",
            None if prices is None else "{" + ",".join(map(str, prices)) + "}",
            None if attributes is None else json.dumps(attributes, separators=(",", ":")),
            None if trace is None else trace.decode(),
        )
        return _lean_line(msg, batch_id, kafka_clock, values)

    return order_row


# The orders' value columns, in the order `lean_order_rows` writes them (the shipped declaration's).
ORDER_COLUMNS = (
    "order_id",
    "placed_at",
    "total",
    "currency",
    "shipped_on",
    "customer_id",
    "customer_tier",
    "skus",
    "item_prices",
    "attributes",
    "trace_id",
)


def consume(
    kafka: dict,
    pg: dict,
    topic: str,
    table: str,
    until: dict[int, int],
    batch_records: int,
    row: Callable = row,
    columns: tuple[str, ...] = VALUE_COLUMNS,
) -> int:
    offsets = f"{table}_offsets"  # each loop's own: two loops on one topic each read it all
    conn = psycopg2.connect(**pg)
    with conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {offsets} (topic text, partition integer, next_offset bigint NOT NULL, "
            "PRIMARY KEY (topic, partition))"
        )
        cur.execute(
            f'CREATE TABLE IF NOT EXISTS {dead_table(table)} (topic text, partition integer, "offset" bigint, '
            'reason text NOT NULL, PRIMARY KEY (topic, partition, "offset"))'
        )
        cur.execute(f"SELECT partition, next_offset FROM {offsets} WHERE topic = %s", (topic,))
        stored = dict(cur.fetchall())
    consumer = KafkaConsumer(
        **kafka,
        enable_auto_commit=False,
        isolation_level="read_committed",
        max_partition_fetch_bytes=4 * 2**20,
        fetch_max_bytes=32 * 2**20,
    )
    parts = [TopicPartition(topic, p) for p in until]
    consumer.assign(parts)
    for tp in parts:
        consumer.seek(tp, stored.get(tp.partition, 0))
    position = {p: stored.get(p, 0) for p in until}
    total = 0
    while any(position[p] < until[p] for p in until):
        buffer, dead, count, batch_id = io.StringIO(), io.StringIO(), 0, str(uuid.uuid4())
        while count < batch_records and any(position[p] < until[p] for p in until):
            for tp, messages in consumer.poll(timeout_ms=1000, max_records=10_000).items():
                for msg in messages:
                    if msg.offset >= until[tp.partition]:
                        break
                    try:
                        buffer.write(row(msg, batch_id))
                    except ValueError as exc:  # not JSON (UnicodeDecodeError is one too)
                        dead.write(f"{msg.topic}\t{msg.partition}\t{msg.offset}\t{_text(f'{exc!r}')}\n")
                    position[tp.partition] = msg.offset + 1
                    count += 1
        buffer.seek(0)
        dead.seek(0)
        with conn, conn.cursor() as cur:
            cur.copy_expert(
                f"COPY {table} (source_topic, source_partition, source_offset, kafka_timestamp, batch_id, "
                f"{', '.join(columns)}) FROM STDIN",
                buffer,
            )
            cur.copy_expert(f"COPY {dead_table(table)} FROM STDIN", dead)
            cur.execute(
                f"INSERT INTO {offsets} SELECT %s, p, o FROM unnest(%s::int[], %s::bigint[]) "
                "AS u(p, o) ON CONFLICT (topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset",
                (topic, list(position), list(position.values())),
            )
        total += count
    consumer.close()
    conn.close()
    return total


def peak_rss_mib() -> float:
    """This process's peak RSS since it started: the kernel's high-water mark of its memory map (VmHWM). Not
    getrusage's ru_maxrss, which keeps the parent's RSS at the fork across the exec: a loop started by a bench
    holding 800 MiB would report 800 MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("/proc/self/status has no VmHWM line")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--table", required=True)
    parser.add_argument("--until", required=True, help="JSON {partition: end offset}")
    parser.add_argument("--batch-records", type=int, default=100_000)
    parser.add_argument("--name", default="", help="a marker for the bench's memory sampler")
    parser.add_argument("--lean", action="store_true", help="each second formatted once, text escaped when needed")
    parser.add_argument("--orders", action="store_true", help="the topic holds orders (bench.orders_dataset): lean")
    args = parser.parse_args(argv)
    kafka = kafka_python_config(get_connection("microingest_kafka"))
    pg = postgres_params(get_connection("microingest_postgres"))
    records = consume(
        kafka,
        pg,
        args.topic,
        args.table,
        {int(p): o for p, o in json.loads(args.until).items()},
        args.batch_records,
        lean_order_rows() if args.orders else lean_rows() if args.lean else row,
        ORDER_COLUMNS if args.orders else VALUE_COLUMNS,
    )
    print(json.dumps({"records": records, "done_at": time.time(), "peak_rss_mib": round(peak_rss_mib(), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
