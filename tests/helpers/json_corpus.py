"""JSON record values for the differential tests of the fast decoders (Arrow's, the JVM's) against the reference:
values generated from the hostile records' schema, odd tokens put in, and the bytes mutated; every spelling of a
number and of an escaped character."""

from __future__ import annotations

import base64
import json
import random

from helpers.hostile_records import SCHEMA

ODD_FIELD_VALUES = [
    "1.0",
    "1e5",
    "-0",
    "-0.0",
    "0.1",
    "1e-400",
    "1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    str(2**63 - 1),
    str(-(2**63)),
    str(2**63),
    str(2**64),
    "true",
    "false",
    "null",
    '""',
    '"x"',
    '"a\\u0000b"',
    '"\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\t\\n\\"\\\\"',
    '"\u00e9\u4e2d"',
    '"2024-01-01T00:00:00"',
    '"2024-01-01"',
    "[]",
    "{}",
    '[1, {"a": 2}]',
    "4000000000000",
    "-4000000000000",
    "3999999999999",
    "1700000000123",
    "123456789012345678",
]


def random_value(rng: random.Random) -> bytes:
    doc = {}
    for name, spec in SCHEMA.items():
        kind = spec["type"] if isinstance(spec, dict) else spec
        roll = rng.random()
        if roll < 0.08:
            continue  # missing
        if roll < 0.25:
            doc[name] = json.loads(rng.choice(ODD_FIELD_VALUES)) if rng.random() < 0.5 else None
            continue
        doc[name] = {
            "string": lambda: "".join(rng.choice('ab\u00e9"\\\t ') for _ in range(rng.randrange(6))),
            "integer": lambda: rng.randrange(-(2**63), 2**63),
            "double": lambda: rng.choice(
                [
                    rng.uniform(-1e9, 1e9),
                    rng.random(),
                    float(rng.randrange(10**6)),
                    -0.0,
                    5e-324,
                    1.7976931348623157e308,
                ]
            ),
            "boolean": lambda: rng.random() < 0.5,
            "timestamp": lambda: (
                iso_timestamp(rng)
                if rng.random() < 0.15
                else rng.randrange(-MAX_MS, MAX_MS)
                if rng.random() < 0.3
                else rng.randrange(-4 * 10**12, 4 * 10**12)
            ),
        }[kind]()
    text = json.dumps(doc, ensure_ascii=rng.random() < 0.5)
    if rng.random() < 0.3:  # a raw JSON token Python's json.dumps would not write
        name = rng.choice(list(SCHEMA) + ["extra"])
        text = text[:-1] + (", " if len(text) > 2 else "") + f'"{name}": {rng.choice(ODD_FIELD_VALUES)}}}'
    value = text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that are not UTF-8
    return mutate(rng, value) if rng.random() < 0.3 else value


def iso_timestamp(rng: random.Random) -> str:
    """ISO-8601 text of the forms producers write, each part now and then just outside its range or spelled another
    way Python's fromisoformat may or may not read: separators, fractions of any length, offsets of every shape."""

    def part(low: int, high: int, edge: int, width: int = 2) -> str:
        return str(rng.randint(low, high) if rng.random() < 0.85 else rng.choice([edge, low, high])).zfill(width)

    year = rng.randint(1900, 2100) if rng.random() < 0.8 else rng.choice([rng.randint(1, 9999), 1, 2, 9998, 9999, 0])
    date = f"{str(year).zfill(4)}-{part(1, 12, 13)}-{part(1, 28, rng.choice([0, 29, 30, 31, 32]))}"
    time = f"{part(0, 23, 24)}:{part(0, 59, 60)}:{part(0, 59, rng.choice([60, 61]))}"
    fraction = rng.choice(
        ["", "", f"{rng.choice('.,')}{''.join(rng.choice('0123456789') for _ in range(rng.randint(0, 12)))}"]
    )
    if rng.random() < 0.3:
        fraction = rng.choice([".5", ".9999995", ".0000005", ".0000015", ".9999999", ".123456789", ".1234567890"])
    hours, minutes = part(0, 14, rng.choice([23, 24, 99])), part(0, 59, 60)
    offset = rng.choice(
        ["", "Z", "z", f"+{hours}:{minutes}", f"-{hours}:{minutes}", f"+{hours}{minutes}", f"-{hours}", "-00:00"]
    )
    text = f"{date}{rng.choice('TTTTTTTTTTTTT   tx')}{time}{fraction}{offset}"
    if rng.random() < 0.05:
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(["", " ", "0", "\u0660", "-", ":"]) + text[i + 1 :]
    return text


MAX_MS = 253_402_300_800_005  # a little beyond the last storable millisecond, 9999-12-31T23:59:59.999Z


def mutate(rng: random.Random, value: bytes) -> bytes:
    i = rng.randrange(len(value) + 1)
    return rng.choice(
        [
            lambda: value[:i],
            lambda: value[:i] + bytes([rng.randrange(256)]) + value[i:],
            lambda: value[:i] + value[i + 1 :],
            lambda: b"\xef\xbb\xbf" + value,
            lambda: value + b" " + value,
            lambda: value.replace(b", ", b",\n", 1),
            lambda: b" \t" + value + b"\r",
            lambda: b'{"deep": ' + b"[" * 1200 + b"]" * 1200 + b', "id": "x"}',
            lambda: b"[" + value + b"]",
            lambda: b"",
            lambda: b"   ",
        ]
    )()


NUMBER_SPELLINGS = [
    "0",
    "-0",
    "0.0",
    "-0.0",
    "-0.0e0",
    "0e5",
    "-0e-5",
    "1E2",
    "1e2",
    "1E+2",
    "1.0e-0",
    "1.5E+3",
    "100",
    "1e400",
    "-1e400",
    "1e-400",
    "-1e-400",
    "2.4e-324",
    "2.5e-324",
    "4.9e-324",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "9007199254740993",
    "9007199254740993.0",
    "12345678901234567.89",
    "123456789012345678901234567890",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "0.1",
    "0.30000000000000004",
    "253402300799999",
    "-62135596800000",
    "253402300800000",
    "4000000000001",
    "1e99999",
    "1" * 400,
    "0." + "0" * 300 + "1",
    # Exponents Python's Decimal cannot hold (from about 10**18), and the largest it can.
    "0e1000000000000000000",
    "-0e1000000000000000000",
    "-1e-2000000000000000000",
    "1e+1000000000000000000",
    "0e999999999999999999",
    "0e-000999999999999999",
]
STRING_SPELLINGS = (
    [f'"\\u{c:04x}"' for c in range(0x20)]
    + [f'"\\u{c:04X}x"' for c in range(0x20)]
    + [
        '"\\b\\f\\n\\r\\t\\"\\\\\\/"',
        '"\\ud83d\\ude00"',
        '"\\uD83D\\uDE00"',
        '"\U0001f600"',
        '"\\ud800"',
        '"\\udc00"',
        '"\\ude00\\ud83d"',
        '"\\ud83d"',
        '"\\u007f"',
        '"\x7f"',
        '"\\u00e9"',
        '"\u00e9"',
        '"\\uffff"',
        '"\\ufeff"',
        '"\U0010ffff"',
        '"\\udbff\\udfff"',
        '"\\u2028\\u2029"',
        '"\u2028"',
    ]
)


def decimal_token(rng: random.Random) -> str:
    """A decimal as raw JSON, as producers write one: a number or text, of any length and scale, now and then with
    trailing zeros, an exponent, a sign, too many digits, or text the reference's pattern refuses."""
    digits = "0123456789"

    def run(low: int, high: int) -> str:
        return "".join(rng.choice(digits) for _ in range(rng.randint(low, high)))

    if rng.random() < 0.15:
        return rng.choice(DECIMAL_EDGES)
    whole = run(0, 12) if rng.random() < 0.2 else run(1, 2)
    fraction = (run(1, 2) if rng.random() < 0.8 else run(3, 8)) + "0" * rng.choice([0, 0, 0, 1, 3])
    exponent = f"{rng.choice('eE')}{rng.choice(['', '+', '-'])}{run(1, 3 if rng.random() < 0.9 else 7)}"
    if rng.random() < 0.6:  # a JSON number
        number = (whole.lstrip("0") or "0") + (f".{fraction}" if rng.random() < 0.8 else "")
        return rng.choice(["", "", "-"]) + number + (exponent if rng.random() < 0.1 else "")
    text = rng.choice(["", "", "-", "+"]) + whole
    text += rng.choice([f".{fraction}", f".{fraction}", ".", ""]) + (exponent if rng.random() < 0.1 else "")
    if rng.random() < 0.03:
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice([" ", "_", "\u0661", "x", ".", "e"]) + text[i:]
    return json.dumps(text)


DECIMAL_EDGES = [
    "0",
    "-0",
    "-0.0",
    "0.005",
    "0.015",
    "0.0051",
    "9999999999.99",
    "9999999999.995",
    "-9999999999.995",
    "10000000000",
    "1e10",
    "1E-2",
    "1e-999999",
    "1.5e-7",
    "12345678901234567890123456789012345678",
    "0.000000000000000000000000000000000000000000001",
    '"1e-999999"',
    '"1e1000000"',
    '"+.5"',
    '"5."',
    '"."',
    '""',
    '"NaN"',
    '"Infinity"',
    '"1,5"',
    '" 1.5"',
    "true",
    "[1.5]",
    "{}",
]


def date_text(rng: random.Random) -> str:
    """A calendar date as text, now and then a day that does not exist, another shape, or a timestamp."""
    year = rng.randint(1900, 2100) if rng.random() < 0.8 else rng.choice([0, 1, 2, 9999, rng.randint(1, 9999)])
    month = rng.randint(1, 12) if rng.random() < 0.9 else rng.choice([0, 13])
    day = rng.randint(1, 28) if rng.random() < 0.8 else rng.choice([0, 29, 30, 31, 32])
    text = f"{year:04d}-{month:02d}-{day:02d}"
    roll = rng.random()
    if roll < 0.03:
        text += "T00:00:00"
    elif roll < 0.06:
        text = text.replace("-", "")
    elif roll < 0.09:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["\u0660", " ", "/", "1"]) + text[i + 1 :]
    return text


def uuid_text(rng: random.Random) -> str:
    """A UUID as text: hyphenated or plain, either case, now and then braced, a URN, mis-hyphenated or not hex."""
    plain = f"{rng.getrandbits(128):032x}"
    text = "-".join([plain[:8], plain[8:12], plain[12:16], plain[16:20], plain[20:]]) if rng.random() < 0.7 else plain
    roll = rng.random()
    if roll < 0.2:
        text = text.upper()
    elif roll < 0.24:
        text = "{" + text + "}"
    elif roll < 0.27:
        text = "urn:uuid:" + text
    elif roll < 0.32:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(["-", "g", "", "00"]) + text[i + 1 :]
    return text


def json_any(rng: random.Random, depth: int = 0) -> str:
    """Any JSON value as raw text, as a free-form `json` field holds one: objects (names repeated now and then) and
    arrays nested a few levels, every spelling of a number and of an escaped character; now and then nested about as
    deep as the reference keeps (json_values.MAX_DEPTH)."""
    roll = rng.random()
    if depth == 0 and roll < 0.02:
        n = rng.choice([198, 199, 200, 201])
        return "[" * n + "]" * n
    if depth < 4 and roll < 0.3:
        names = [rng.choice(["a", "b", "é", "\\u0000", "\\ud800", "a\\nb", "1"]) for _ in range(rng.randrange(4))]
        return "{" + ", ".join(f'"{name}": {json_any(rng, depth + 1)}' for name in names) + "}"
    if depth < 4 and roll < 0.5:
        return "[" + ",".join(json_any(rng, depth + 1) for _ in range(rng.randrange(4))) + "]"
    return rng.choice(
        [
            rng.choice(NUMBER_SPELLINGS),
            rng.choice(STRING_SPELLINGS),
            rng.choice(["true", "false", "null", '""', '"x"', "1.50", "-0.000", "1E-7", "12E3", "0.000001"]),
        ]
    )


def base64_token(rng: random.Random) -> str:
    """Bytes as a producer writes them in JSON: standard base64, now and then unpadded, URL-safe, with stray bits in
    its last character, spaces, a character past ASCII, or not text at all."""
    text = base64.b64encode(rng.randbytes(rng.randrange(12))).decode()
    roll = rng.random()
    if roll < 0.05:
        text = text.rstrip("=")
    elif roll < 0.1:
        text = base64.urlsafe_b64encode(rng.randbytes(rng.randrange(1, 12))).decode()
    elif roll < 0.15 and text.endswith("="):
        i = text.index("=") - 1
        text = text[:i] + rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") + text[i + 1 :]
    elif roll < 0.18:
        text = text[:2] + rng.choice([" ", "\n", "=", "\u00e9", "\u0661"]) + text[2:]
    elif roll < 0.2:
        return rng.choice(["1", "null", "true", "[]", '{"a": 1}'])
    return json.dumps(text)
