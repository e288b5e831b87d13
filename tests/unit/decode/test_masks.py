"""Masks of text fields: each method's value, NULL kept NULL, a keyed hash that depends on its key."""

import hashlib
import hmac

import pyarrow as pa
import pytest

from microingest.decode.masks import REDACTED, masked

TEXTS = pa.array(["alice@example.com", None, "", "ünï ☃"], pa.string())


def test_sha256_is_the_hex_digest_of_the_utf8():
    expected = [hashlib.sha256(t.encode()).hexdigest() if t is not None else None for t in TEXTS.to_pylist()]
    assert masked(TEXTS, "sha256").to_pylist() == expected


def test_hmac_sha256_depends_on_its_key_and_needs_one():
    one, other = masked(TEXTS, "hmac_sha256", b"k1"), masked(TEXTS, "hmac_sha256", b"k2")
    assert one[0].as_py() == hmac.new(b"k1", b"alice@example.com", hashlib.sha256).hexdigest()
    assert one[0] != other[0] and one[1].as_py() is None
    assert one[0].as_py() != masked(TEXTS, "sha256")[0].as_py()
    with pytest.raises(ValueError, match="needs a key"):
        masked(TEXTS, "hmac_sha256")


def test_redact_keeps_only_whether_there_was_a_value():
    assert masked(TEXTS, "redact").to_pylist() == [REDACTED, None, REDACTED, REDACTED]


@pytest.mark.parametrize(
    "ip, expected",
    [
        ("192.168.17.201", "192.168.17.0"),
        ("10.0.0.0", "10.0.0.0"),
        ("256.1.1.1", REDACTED),
        ("1.2.3", REDACTED),
        ("1.2.3.4 ", REDACTED),
        ("::1", REDACTED),
        ("not an address", REDACTED),
    ],
)
def test_truncate_24_zeroes_an_ipv4_last_octet_and_redacts_anything_else(ip, expected):
    assert masked(pa.array([ip]), "truncate_24").to_pylist() == [expected]
