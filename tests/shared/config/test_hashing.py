"""shared.config.hashing: keyed hashes (HMAC-SHA256) under one label per kind of value, and the payload
fingerprint `Hasher.request(canonical_request(arguments))` stored beside an idempotency key."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest

from shared.config.errors import NotConfigured
from shared.config.hashing import Hasher
from shared.purchase.schema import canonical_request

SECRET = "unit-test-secret"
HEX64 = re.compile(r"^[0-9a-f]{64}$")


@pytest.fixture
def hasher() -> Hasher:
    return Hasher(SECRET)


def fingerprint(hasher: Hasher, arguments: object) -> str:
    return hasher.request(canonical_request(arguments))


def test_request_is_the_hmac_sha256_of_its_label_and_the_canonical_text(hasher):
    canonical = canonical_request({"email": "ada@example.org"})

    expected = hmac.new(SECRET.encode(), b"request\x00" + canonical.encode(), hashlib.sha256).hexdigest()
    assert hasher.request(canonical) == expected
    assert HEX64.fullmatch(hasher.request(canonical))


def test_request_is_deterministic_across_hashers_with_the_same_secret():
    canonical = canonical_request({"email": "ada@example.org", "name": "Ada"})

    assert Hasher(SECRET).request(canonical) == Hasher(SECRET).request(canonical)


def test_request_depends_on_the_secret():
    canonical = canonical_request({"email": "ada@example.org"})

    assert Hasher(SECRET).request(canonical) != Hasher(SECRET + "!").request(canonical)


def test_request_does_not_contain_the_canonical_text(hasher):
    digest = hasher.request(canonical_request({"email": "ada@example.org"}))

    assert "ada" not in digest and "example" not in digest


def test_each_kind_of_value_is_hashed_under_its_own_label(hasher):
    value = "ada@example.org"

    digests = {
        hasher.request(value),
        hasher.email(value),
        hasher.idempotency_key(value),
        hasher.client_ip(value),
    }

    assert len(digests) == 4


def test_without_a_secret_request_is_not_configured():
    with pytest.raises(NotConfigured, match="STOREFRONT_HASH_SECRET"):
        Hasher("").request(canonical_request({"email": "ada@example.org"}))


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            {"email": "ada@example.org", "name": "Ada", "idempotency_key": "key-87654321"}, id="other-key"
        ),
        pytest.param({"email": "ada@example.org", "name": "Ada"}, id="no-key"),
        pytest.param({"email": " ADA@example.org", "name": "Ada"}, id="email-case-and-space"),
        pytest.param({"email": "ada@example.org", "name": " Ada "}, id="name-whitespace"),
        pytest.param(
            {"email": "ada@example.org", "name": "Ada", "bundle_id": "agent-starter-kit"}, id="default-bundle"
        ),
    ],
)
def test_the_fingerprint_is_equal_for_the_same_purchase(hasher, other):
    first = {"email": "ada@example.org", "name": "Ada", "idempotency_key": "key-12345678"}

    assert fingerprint(hasher, other) == fingerprint(hasher, first)


@pytest.mark.parametrize(
    "other",
    [
        pytest.param({"email": "bob@example.org", "name": "Ada"}, id="email"),
        pytest.param(
            {"email": "ada@example.org", "name": "Ada", "bundle_id": "mcp-field-guide"}, id="bundle"
        ),
        pytest.param({"email": "ada@example.org", "name": "Bob"}, id="name"),
    ],
)
def test_the_fingerprint_differs_for_a_different_purchase(hasher, other):
    first = {"email": "ada@example.org", "name": "Ada", "idempotency_key": "key-12345678"}

    assert fingerprint(hasher, {**other, "idempotency_key": "key-12345678"}) != fingerprint(hasher, first)
