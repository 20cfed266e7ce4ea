"""The sealed records the contact queue holds: no address in the clear, readable only with the
store's secret and for the purpose they were sealed for."""

from __future__ import annotations

import base64

import pytest

from shared.config.errors import NotConfigured
from shared.config.sealing import Sealer, Unreadable

RECORD = {"email": "grace.hopper@example.org", "name": "Grace Hopper ✓"}


def test_a_sealed_record_opens_to_the_same_record_and_holds_no_address():
    sealer = Sealer("unit-test-secret", "contact-queue")

    sealed = sealer.seal(RECORD)

    assert sealer.open(sealed) == RECORD
    assert "grace" not in sealed.lower() and "example" not in sealed
    assert sealed.startswith("s1.") and sealed.isascii()


def test_two_seals_of_one_record_differ_so_the_queue_does_not_show_repeat_buyers():
    sealer = Sealer("unit-test-secret", "contact-queue")

    assert sealer.seal(RECORD) != sealer.seal(RECORD)


@pytest.mark.parametrize(
    "other",
    [Sealer("another-secret", "contact-queue"), Sealer("unit-test-secret", "another-purpose")],
    ids=["another secret (rotated)", "another purpose"],
)
def test_a_record_sealed_under_another_secret_or_purpose_is_unreadable(other):
    with pytest.raises(Unreadable):
        Sealer("unit-test-secret", "contact-queue").open(other.seal(RECORD))


def test_a_changed_byte_is_unreadable():
    sealer = Sealer("unit-test-secret", "contact-queue")
    sealed = sealer.seal(RECORD)
    raw = bytearray(base64.urlsafe_b64decode(sealed[3:] + "=" * (-len(sealed[3:]) % 4)))
    raw[-1] ^= 1
    tampered = "s1." + base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")

    with pytest.raises(Unreadable):
        sealer.open(tampered)


@pytest.mark.parametrize(
    "text", ["", "s1.", "s1.!!!", "s2.AAAA", "plain text", "s1.AAAA", '{"email": "x@y.z"}', None, 7]
)
def test_anything_not_sealed_by_the_store_is_unreadable_not_a_crash(text):
    with pytest.raises(Unreadable):
        Sealer("unit-test-secret", "contact-queue").open(text)


def test_sealed_text_that_is_not_a_record_is_unreadable():
    sealer = Sealer("unit-test-secret", "contact-queue")
    aead = sealer._aead()  # a list, sealed as the store seals a record
    nonce = b"\x00" * 12
    raw = nonce + aead.encrypt(nonce, b"[1, 2]", b"contact-queue")
    with pytest.raises(Unreadable):
        sealer.open("s1." + base64.urlsafe_b64encode(raw).decode().rstrip("="))


def test_without_the_hash_secret_nothing_is_sealed():
    with pytest.raises(NotConfigured, match="STOREFRONT_HASH_SECRET"):
        Sealer("", "contact-queue").seal(RECORD)
