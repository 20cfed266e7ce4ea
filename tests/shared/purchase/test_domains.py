"""shared.purchase.domains: a domain's spellings are one key only where IDNA 2008 makes them one
name; no mapping joins two names, and a label it refuses keeps its text."""

from __future__ import annotations

import pytest

from shared.purchase.domains import ascii_lower, domain_key, is_fake_a_label


@pytest.mark.parametrize(
    ("domain", "key"),
    [
        ("Example.ORG", "example.org"),
        ("example.org.", "example.org"),
        ("example.org..", "example.org.."),
        (".", "."),
        ("", ""),
        ("bücher.de", "xn--bcher-kva.de"),
        ("XN--BCHER-KVA.de", "xn--bcher-kva.de"),
        ("straße.de", "xn--strae-oqa.de"),
        ("strasse.de", "strasse.de"),
        ("пример.рф", "xn--e1afmkfd.xn--p1ai"),
        ("BÜCHER.de", "bÜcher.de"),
        ("xn--bcher-2pa.de", "xn--bcher-2pa.de"),
        ("xn--gmail-2ha.com", "xn--gmail-2ha.com"),
        ("gmail\u00ad.com", "gmail\u00ad.com"),
        ("\uff47mail.com", "\uff47mail.com"),
        ("example\u3002org", "example\u3002org"),
        ("sub_domain.example.org", "sub_domain.example.org"),
        ("r3--sn-abc.example.org", "r3--sn-abc.example.org"),
        ("\u212aelvin.example", "\u212aelvin.example"),
    ],
)
def test_the_key_of_a_domain(domain, key):
    assert domain_key(domain) == key


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("straße.de", "strasse.de"),
        ("xn--gmail-2ha.com", "gmail.com"),
        ("gmail\u00ad.com", "gmail.com"),
        ("\uff47mail.com", "gmail.com"),
        ("xn--bcher-2pa.de", "bücher.de"),
        ("ǅ.example", "dž.example"),
        ("\u212aelvin.example", "kelvin.example"),
        ("\u0130.example", "i.example"),
    ],
)
def test_no_mapping_makes_two_names_one(one, other):
    assert domain_key(one) != domain_key(other)


@pytest.mark.parametrize(
    ("label", "fake"),
    [
        ("xn--bcher-kva", False),
        ("XN--BCHER-KVA", False),
        ("xn--strae-oqa", False),
        ("xn--p1ai", False),
        ("example", False),
        ("ab--cd", False),
        ("xn--gmail-2ha", True),
        ("xn--bcher-2pa", True),
        ("xn--zz", True),
        ("xn--a", True),
        ("xn--", True),
        ("xn--abc-", True),
    ],
)
def test_a_fake_a_label(label, fake):
    assert is_fake_a_label(label) is fake


def test_only_ascii_letters_change_case():
    assert ascii_lower("ÄBC Straße İ K") == "Äbc straße İ k"
    assert ascii_lower("\u212a") == "\u212a"
