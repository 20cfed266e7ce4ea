"""Governance for verified agents, on Azurite: each agent its own hourly bucket, every agent of one
site (its registrable domain) a shared one, so that minting keys or subdomains buys no more."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from shared.config.errors import LimitExceeded
from shared.config.hashing import Hasher
from shared.purchase.agent import Agent
from shared.purchase.governance import Governance, Limits
from shared.seams.counters import TableCounters
from shared.seams.storage import table_client

T0 = 1893492900.0  # 2030-01-01T10:15:00Z


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "gova" + uuid.uuid4().hex[:12], timeout=5)
    yield client
    client.delete_table()
    client.close()


def governance(table, *, agent: int = 2, site: int | None = None) -> Governance:
    limits = Limits(
        1,
        Decimal("5.00"),
        Decimal("0.01"),
        agent_rate_limit_per_hour=agent,
        agent_site_rate_limit_per_hour=site,
    )
    return Governance(TableCounters(table), Hasher("unit-test-secret"), limits, clock=lambda: T0)


@pytest.mark.parametrize(
    ("origin", "site"),
    [
        ("https://agent.example", "agent.example"),
        ("https://eu.fleet.agent.example:8443", "agent.example"),
        ("https://bot.example.co.uk", "example.co.uk"),
        ("https://alice.github.io", "alice.github.io"),  # a private suffix: each user is a site
        ("http://127.0.0.1:8080", "127.0.0.1"),
        ("http://[2001:db8::1]:8080", "2001:db8::1"),
        ("http://localhost:9000", "localhost"),
    ],
)
def test_an_agents_site_is_its_registrable_domain(origin, site):
    assert Agent(origin, "k").site == site


def test_each_agent_has_its_own_bucket_and_no_address_limit(table):
    gov = governance(table, agent=2)
    first, second = Agent("https://a.example", "k1"), Agent("https://b.example", "k2")

    taken = [gov.reserve_agent_rate(first), gov.reserve_agent_rate(first), gov.reserve_agent_rate(second)]

    assert all(len(pair) == 2 for pair in taken), "its own bucket and its site's"
    with pytest.raises(LimitExceeded, match="STOREFRONT_AGENT_RATE_LIMIT_PER_HOUR"):
        gov.reserve_agent_rate(first)
    gov.reserve_rate("203.0.113.9")  # the address limit (1) is untouched by the agents


def test_keys_and_subdomains_of_one_site_share_the_sites_limit(table):
    gov = governance(table, agent=2, site=3)
    minted = [Agent(f"https://n{i}.agent.example", f"key{i}") for i in range(5)]

    for agent in minted[:3]:
        gov.reserve_agent_rate(agent)
    with pytest.raises(LimitExceeded, match=r"agents of one site \(agent\.example\).*SITE_RATE_LIMIT"):
        gov.reserve_agent_rate(minted[3])
    assert gov.reserve_agent_rate(Agent("https://other.example", "key0")), "another site"


def test_a_site_refusal_gives_the_agents_own_reservation_back(table):
    gov = governance(table, agent=5, site=1)
    gov.reserve_agent_rate(Agent("https://a.site.example", "k"))
    late = Agent("https://b.site.example", "k")

    for _ in range(3):
        with pytest.raises(LimitExceeded):
            gov.reserve_agent_rate(late)
    loosened = Governance(
        TableCounters(table),
        Hasher("unit-test-secret"),
        Limits(
            1,
            Decimal("5.00"),
            Decimal("0.01"),
            agent_rate_limit_per_hour=1,
            agent_site_rate_limit_per_hour=100,
        ),
        clock=lambda: T0,
    )
    assert loosened.reserve_agent_rate(late), "its own bucket holds none of the refused attempts"


def test_the_site_limit_defaults_to_ten_agents_worth():
    assert Limits(5, Decimal(0), Decimal(0), agent_rate_limit_per_hour=7).agent_site_rate == 70
    assert Limits(5, Decimal(0), Decimal(0)).agent_site_rate == 50
