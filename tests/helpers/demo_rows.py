"""What the shipped examples' records (`make demo`'s events and orders) must land as, column for column, read back
with psycopg2 (numeric as Decimal, jsonb as its JSON, arrays as lists)."""

from __future__ import annotations

import json
from datetime import date, datetime

ORDER_COLUMNS = (
    "order_id::text, placed_at, total, currency, shipped_on, customer_id, customer_tier, skus, item_prices, "
    "attributes, trace_id"
)
EVENT_COLUMNS = "event_id, user_id, event_type, amount, event_time"


def expected_order(order: dict) -> tuple:
    """The row of ORDER_COLUMNS for one of `demo_orders.sample_orders`."""
    return (
        order["order_id"],
        datetime.fromisoformat(order["placed_at"]),
        order["total"],
        order["currency"],
        date.fromisoformat(order["shipped_on"]),
        order["customer"]["id"],
        order["customer"]["tier"],
        order["skus"],
        order["item_prices"],
        order["attributes"],
        f"trace-{order['order_id'][:8]}",
    )


def expected_event(value: bytes) -> tuple:
    """The row of EVENT_COLUMNS for one of `demo.sample_events`' values."""
    event = json.loads(value)
    return (
        event["event_id"],
        event["user_id"],
        event["event_type"],
        event["amount"],
        datetime.fromisoformat(event["event_time"]),
    )
