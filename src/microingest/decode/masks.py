"""Masks of declared text fields (`mask:`), applied to a column of rows on the driver before they are encoded for
COPY (`spark.row_encoder.RowEncoder`): what lands in the target is the masked value, and nothing upstream of the
encoder keeps the row.

- `sha256`: the SHA-256 of the text's UTF-8, in hex (equal texts stay equal, so joins and counts still work; a
  guessable value stays guessable: use the keyed hash for those).
- `hmac_sha256`: HMAC-SHA-256 under a key from an Airflow connection's password, in hex.
- `redact`: `[redacted]`.
- `truncate_24`: an IPv4 address with its last octet zeroed (a /24); any other text is redacted.
NULL stays NULL under every mask.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable

import pyarrow as pa

REDACTED = "[redacted]"
_IPV4 = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})")


def masked(column: pa.Array | pa.ChunkedArray, method: str, key: bytes | None = None) -> pa.Array:
    """The text column under `method` (see the module's list); `key` for hmac_sha256."""
    mask = _method(method, key)
    return pa.array([None if v is None else mask(v) for v in column.to_pylist()], pa.string())


def _method(method: str, key: bytes | None) -> Callable[[str], str]:
    if method == "sha256":
        return lambda v: hashlib.sha256(v.encode("utf-8")).hexdigest()
    if method == "hmac_sha256":
        if not key:
            raise ValueError("hmac_sha256 needs a key")
        return lambda v: hmac.new(key, v.encode("utf-8"), hashlib.sha256).hexdigest()
    if method == "redact":
        return lambda v: REDACTED
    if method == "truncate_24":
        return _truncated
    raise ValueError(f"no mask {method!r}")


def _truncated(value: str) -> str:
    found = _IPV4.fullmatch(value)
    if found is None or any(int(octet) > 255 for octet in found.groups()):
        return REDACTED
    return ".".join(found.groups()[:3]) + ".0"
