"""shared.purchase.providers: the table of providers' rules is well-formed, so that reading an
address by it is unambiguous and every key stays a key. The cases it gives are in
tests/fixtures/mailboxes.json; tests/repo/test_docs.py holds the docs' copy of the table to it."""

from __future__ import annotations

import pytest

from shared.purchase.domains import domain_key
from shared.purchase.mailbox import TAG
from shared.purchase.providers import PROVIDERS, providers_of

DOMAINS = sorted({domain for row in PROVIDERS for domain in row.domains})


def test_every_row_has_a_name_of_its_own():
    names = [row.name for row in PROVIDERS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_domain_is_written_as_its_key(domain):
    """A row is looked up by the key `domain_key` gives, so it must list domains in that form."""
    assert domain.isascii() and domain_key(domain) == domain


@pytest.mark.parametrize("row", PROVIDERS, ids=lambda row: row.name)
def test_a_row_says_where_its_rule_is_written(row):
    urls = [url for _, url in row.sources]
    assert row.sources and all(title for title, _ in row.sources)
    if row.documented:
        assert urls and all(url.startswith(("https://", "http://")) for url in urls)
    else:
        assert any("report" in title for title, _ in row.sources)


@pytest.mark.parametrize("row", PROVIDERS, ids=lambda row: row.name)
def test_a_row_reads_a_user_name_one_way(row):
    """Ignored and equivalent characters are never a tag separator on the same domains (which
    would make the order of the rules matter), and an equivalence names two characters or none."""
    separators = {TAG} | {c for domain in row.domains for other in providers_of(domain) for c in other.tags}
    assert not separators & set(row.ignored + row.equivalent)
    assert len(row.equivalent) != 1
    assert not set(row.ignored) & set(row.equivalent)


@pytest.mark.parametrize("row", [row for row in PROVIDERS if row.one_namespace], ids=lambda row: row.name)
def test_the_domains_of_one_namespace_have_one_main_name_and_the_same_rules(row):
    """The main name is unambiguous, and a key under it is read by the rules its alias was."""
    for domain in row.domains:
        assert [other.name for other in providers_of(domain) if other.one_namespace] == [row.name]
        assert providers_of(domain) == providers_of(row.domains[0])


def test_no_listed_domain_lies_under_a_subdomain_addressed_one():
    """Else subdomain addressing, or a relay's user subdomains, would read that domain's
    addresses as a user's."""
    addressed = {d for row in PROVIDERS if row.subdomains or row.user_subdomains for d in row.domains}
    assert not [domain for domain in DOMAINS if domain.partition(".")[2] in addressed]


@pytest.mark.parametrize("row", PROVIDERS, ids=lambda row: row.name)
def test_a_user_subdomain_is_one_mailbox_or_addresses_a_user_never_both(row):
    assert not (row.subdomains and row.user_subdomains)


@pytest.mark.parametrize(
    ("domain", "names"),
    [
        ("yahoo.com", ["Yahoo"]),
        ("yahoo.co.uk", ["Yahoo"]),
        ("yahoo.com.br", ["Yahoo"]),
        ("yahoo.com.ar", ["Yahoo"]),
        ("mail.yahoo.co.uk", []),
        ("yahoo", []),
        ("yahoo.example.org", []),
        ("yahoo.eu.org", []),
        ("yahoo.co.jp", []),
        ("yahoo.ch", []),
        ("ymail.com", ["Yahoo: ymail.com and rocketmail.com"]),
        ("ya.ru", ["Yandex", "Yandex: dot and hyphen"]),
        ("sent.com", ["Fastmail"]),
        ("ada.sent.com", []),
        ("mozmail.com", ["Firefox Relay"]),
        ("ada.mozmail.com", []),
        ("anonaddy.me", ["addy.io"]),
        ("example.org", []),
    ],
)
def test_the_rows_of_a_domain(domain, names):
    assert [row.name for row in providers_of(domain)] == names
