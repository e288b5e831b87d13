"""Orders as a shop's producers write them (`pipelines/orders.yaml`'s shape: a UUID, an ISO-8601 time, money as
decimals, a nested customer, arrays, a header), for the differential tests of the JVM's decoder against the reference:
mostly well formed, each part now and then missing, null, of another JSON type, duplicated or drawn from the odd
values of `json_corpus`."""

from __future__ import annotations

import json
import random

from helpers.json_corpus import date_text, decimal_token, iso_timestamp, mutate, uuid_text

ORDER_SCHEMA = {
    "order_id": {"type": "uuid", "required": True},
    "placed_at": {"type": "timestamp", "required": True},
    "total": {"type": "decimal", "precision": 12, "scale": 2, "required": True},
    "currency": "string",
    "shipped_on": "date",
    "customer_id": {"type": "string", "path": "customer.id", "required": True},
    "customer_tier": {"type": "string", "path": "customer.tier"},
    "city": {"type": "string", "path": "customer.address.city"},
    "first_sku": {"type": "string", "path": "lines.0.sku"},
    "second_qty": {"type": "integer", "path": "lines.1.qty"},
    "skus": {"type": "array", "items": "string"},
    "item_prices": {"type": "array", "items": "decimal", "precision": 10, "scale": 2, "rounding": "half_even"},
    "flags": {"type": "array", "items": "boolean"},
    "attributes": "json",
    "trace_id": {"from": "header", "name": "trace-id"},
    "span": {"from": "header", "name": "span", "type": "bytes"},
    "order_key": {"from": "key"},
}

# Values of a JSON type other than the one wanted, for any part.
_OTHERS = ["null", "1", "-0", "1.5", "true", '"x"', "[]", "{}", "[null]", '{"id": "c"}', '["a", 1]']


def order_value(rng: random.Random) -> bytes:
    """One order's JSON value; about a third of them odd somewhere."""

    def odd(usual: str) -> str:
        return rng.choice(_OTHERS) if rng.random() < 0.03 else usual

    lines = [
        {"sku": f"SKU-{rng.randrange(1000)}", "qty": rng.randint(1, 5)} for _ in range(rng.choice([0, 1, 2, 2, 3]))
    ]
    customer = {"id": f"c{rng.randrange(10**6)}", "tier": rng.choice(["gold", "silver", None])}
    if rng.random() < 0.5:
        customer["address"] = {"city": rng.choice(["Lyon", "Zürich", "東京", None])}
    parts = {
        "order_id": json.dumps(str(uuid_text(rng)) if rng.random() < 0.1 else _uuid(rng)),
        "placed_at": json.dumps(iso_timestamp(rng) if rng.random() < 0.1 else _placed(rng)),
        "total": decimal_token(rng) if rng.random() < 0.1 else f"{rng.randrange(10**7)}.{rng.randrange(100):02d}",
        "currency": json.dumps(rng.choice(["EUR", "USD", "CHF"])),
        "shipped_on": json.dumps(date_text(rng)) if rng.random() < 0.7 else "null",
        "customer": odd(json.dumps(customer, ensure_ascii=rng.random() < 0.5)),
        "lines": odd(json.dumps(lines)),
        "skus": odd(
            json.dumps([rng.choice([line["sku"], None]) if rng.random() < 0.1 else line["sku"] for line in lines])
        ),
        "item_prices": odd("[" + ", ".join(_price(rng) for _ in lines) + "]"),
        "flags": odd(json.dumps([rng.random() < 0.5 for _ in range(rng.randrange(3))])),
        "attributes": json.dumps({"gift": rng.random() < 0.2, "note": "x" * rng.randrange(20)}),
    }
    names = [name for name in parts if rng.random() < 0.97]
    if rng.random() < 0.05:  # a name twice: the later value counts
        names.append(rng.choice(names or ["customer"]))
    text = "{" + ", ".join(f'"{name}": {parts.get(name, "null")}' for name in names) + "}"
    value = text.encode()
    return mutate(rng, value) if rng.random() < 0.03 else value


def order_headers(rng: random.Random) -> list[tuple[str, bytes | None]]:
    """The headers producers set (a trace id, a span), now and then missing, repeated, null, not UTF-8 or with NUL."""
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        headers.append(("trace-id", rng.choice([f"t-{rng.randrange(10**9)}".encode()] * 8 + [None, b"\xff", b"a\x00"])))
    if rng.random() < 0.5:
        headers.append(("span", rng.choice([bytes(rng.randrange(256) for _ in range(8)), None])))
    if rng.random() < 0.2:
        headers.append(("other", b"x"))
    rng.shuffle(headers)
    return headers


def _uuid(rng: random.Random) -> str:
    hexits = f"{rng.getrandbits(128):032x}"
    return f"{hexits[:8]}-{hexits[8:12]}-{hexits[12:16]}-{hexits[16:20]}-{hexits[20:]}"


def _placed(rng: random.Random) -> str:
    micros = rng.randrange(10**6)
    return (
        f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
        + (f"{rng.randint(0, 59):02d}.{micros:06d}{rng.choice(['Z', '+01:00', '-05:00'])}")
    )


def _price(rng: random.Random) -> str:
    return (
        rng.choice(["null", decimal_token(rng)])
        if rng.random() < 0.1
        else f"{rng.randrange(10**5)}.{rng.randrange(100):02d}"
    )
