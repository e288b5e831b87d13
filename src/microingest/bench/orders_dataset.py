"""The bench's orders: record i as a shop's producers write an order (`pipelines/orders.yaml`'s shape): a UUID, the
time it was placed as ISO-8601 text with an offset, money as exact JSON numbers, a ship date, a nested customer, arrays
of SKUs and prices, free-form attributes, and a trace id in a header. About 330 bytes a value.

Like the events (`dataset`), record i goes to partition i % P at offset i // P and was placed at EVENT_TIME_MS + i,
so what a target should hold follows from i alone; the same share of records is cut off halfway.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from microingest import settings
from microingest.bench.dataset import EVENT_TIME_MS, ISO_OFFSETS, iso_text
from microingest.decode.json_values import json_text

_TIERS = ("gold", "silver", None)
_CHANNELS = ("web", "app", "store")
_SKUS = tuple(f"sku-{name}" for name in ("apple", "pear", "fig", "kiwi", "lime", "plum", "date", "yuzu"))
TIME_COLUMN = "placed_at"


def shipped_declaration() -> dict[str, Any]:
    """The shipped orders pipeline's declaration, as its file says it."""
    return yaml.safe_load(Path(settings.repo_root() / "pipelines" / "orders.yaml").read_text())


def orders_declaration(base: dict[str, Any]) -> dict[str, Any]:
    """A bench declaration (`base`: its name, topic, table, batch sizes) with the shipped orders pipeline's schema and
    sink mode, into a plain table: the shipped one partitions by day and keeps 90 days, and the bench's orders are of
    1 January."""
    shipped = shipped_declaration()
    return {**base, "schema": shipped["schema"], "sink_mode": shipped["sink_mode"], "value_format": "json"}


def _prices(i: int) -> list[Decimal]:
    return [Decimal(((i + k) * 7_919 % 99_999) + 1).scaleb(-2) for k in range(i % 3 + 1)]


def order(i: int) -> dict[str, Any]:
    """Record i's order as its producer holds it: money as Decimal, the time as ISO-8601 text."""
    prices = _prices(i)
    return {
        "order_id": str(uuid.UUID(int=(i + 1) * 0x9E3779B97F4A7C15_F39CC0605CEDC835 % 2**128)),
        "placed_at": iso_text(EVENT_TIME_MS + i, ISO_OFFSETS[i % len(ISO_OFFSETS)]),
        "total": sum(prices, Decimal("0.00")),
        "currency": "EUR",
        "shipped_on": f"2026-01-{1 + i % 28:02d}",
        "customer": {"id": f"cust-{i * 31 % 100_003:06d}", "tier": _TIERS[i % 3]},
        "skus": [_SKUS[(i + k) % len(_SKUS)] for k in range(len(prices))],
        "item_prices": prices,
        "attributes": {"gift": i % 5 == 0, "channel": _CHANNELS[i % 3]},
    }


def order_value_bytes(i: int) -> bytes:
    """Record i's order as JSON text, its numbers written exactly."""
    return json_text(order(i)).encode()


def expected_row(i: int) -> tuple:
    """Record i's order in the target's value columns (`order_schema`'s order), from its values, not decoded."""
    o = order(i)
    at = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=EVENT_TIME_MS + i)
    return (
        o["order_id"],
        at,
        o["total"],
        o["currency"],
        o["shipped_on"],
        o["customer"]["id"],
        o["customer"]["tier"],
        "{" + ",".join(o["skus"]) + "}",
        "{" + ",".join(map(str, o["item_prices"])) + "}",
        json_text(o["attributes"]),
        order_headers(i)[0][1].decode(),
    )


def order_headers(i: int) -> list[tuple[str, bytes]]:
    return [("trace-id", f"trace-{i:010x}".encode())]
