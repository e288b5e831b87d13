"""`make demo`'s orders: sample orders for the shipped `orders` pipeline (pipelines/orders.yaml), as a shop's
producers would write them (JSON, money as exact numbers, a nested customer, a trace id header), and what they add
up to, for the demo to compare with what landed."""

from __future__ import annotations

import random
import uuid
from datetime import datetime, timedelta, timezone
from decimal import Decimal

from microingest.decode.json_values import json_text

PIPELINE = "orders"
TIERS = ("gold", "silver", None)
SKUS = ("sku-apple", "sku-pear", "sku-fig", "sku-kiwi", "sku-lime")


def sample_orders(n: int, seed: int) -> list[dict]:
    """Orders placed over the last three days, each a dict in the producers' JSON shape."""
    rnd = random.Random(seed)
    now = datetime.now(timezone.utc)
    out = []
    for _ in range(n):
        placed = now - timedelta(seconds=rnd.randrange(3 * 86_400))
        prices = [Decimal(rnd.randrange(1, 100_000)).scaleb(-2) for _ in range(rnd.randrange(1, 4))]
        out.append(
            {
                "order_id": str(uuid.UUID(int=rnd.getrandbits(128))),
                "placed_at": placed.isoformat(),
                "total": sum(prices, Decimal("0.00")),
                "currency": "EUR",
                "shipped_on": (placed + timedelta(days=rnd.randrange(1, 4))).date().isoformat(),
                "customer": {"id": f"cust-{rnd.randrange(200):03d}", "tier": rnd.choice(TIERS)},
                "skus": [rnd.choice(SKUS) for _ in prices],
                "item_prices": prices,
                "attributes": {"gift": rnd.random() < 0.2, "channel": rnd.choice(["web", "app", "store"])},
            }
        )
    return out


def as_record(order: dict) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers): the value JSON with its numbers written exactly, and a trace id header."""
    trace = f"trace-{order['order_id'][:8]}".encode()
    return order["customer"]["id"].encode(), json_text(order).encode(), [("trace-id", trace)]
