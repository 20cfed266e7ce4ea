"""shared.purchase.mailbox: which strings reach one inbox, from a fixture of cases that grows with every
provider rule (tests/fixtures/mailboxes.json)."""

from __future__ import annotations

import json
import random

import pytest

from shared.purchase.mailbox import mailbox
from shared.purchase.schema import normalise_email
from tests.support import ROOT

CASES = json.loads((ROOT / "tests" / "fixtures" / "mailboxes.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("address", "expected", "why"), CASES["same"], ids=[c[2] for c in CASES["same"]])
def test_an_address_is_counted_under_its_mailbox(address, expected, why):
    assert mailbox(address) == expected


@pytest.mark.parametrize(("one", "other", "why"), CASES["different"], ids=[c[2] for c in CASES["different"]])
def test_addresses_of_two_inboxes_keep_two_keys(one, other, why):
    assert mailbox(one) != mailbox(other)


@pytest.mark.parametrize("address", [row[0] for row in CASES["same"]])
def test_a_mailbox_key_is_its_own_mailbox(address):
    """The key is a fixed point: counting the key again would land on the same counter."""
    assert mailbox(mailbox(address)) == mailbox(address)


def test_the_key_of_a_validated_address_is_what_the_store_already_normalises_it_to_when_untagged():
    """Addresses without a tag, outside the providers' rules, keep the key the previous version
    counted them under (`normalise_email`), so their counts carry over an upgrade."""
    for address in ("Ada.Lovelace@Example.org", " grace@example.com ", "x_y@sub.example.net"):
        assert mailbox(address) == normalise_email(address)


def test_any_text_gives_a_key_never_an_exception_and_a_key_is_its_own_mailbox():
    pieces = ["a", ".", "+", "-", "_", "@", "xn--", "ü", "Ü", "\u3002", "\uff0e", "\u0130", "\u212a", "9"]
    pieces += ["gmail.com", "yahoo", "yahoo.co.uk", "fastmail.com", "sent.com", "proton.me", "ya.ru", "co"]
    pieces += ["mozmail.com", "anonaddy.me", "simplelogin.com"]
    pieces += ["\x00", "\ud800", " ", "ß", "\u00ad", "\u200d", "xn--gmail-2ha", "xn--bcher-kva", "bücher"]
    rng = random.Random(23)
    for _ in range(20_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        key = mailbox(text)
        assert isinstance(key, str)
        if " " not in text:  # a blank inside one label can come to the edge of a subdomain's user name
            assert mailbox(key) == key, text
