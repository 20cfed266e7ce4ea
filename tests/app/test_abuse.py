"""Nobody can turn the store against a third party: end to end through the dev host, the Brevo
sandbox counting what reaches the victim's inbox and contact record."""

from __future__ import annotations

import pytest

from shared.purchase.fulfillment import CONTACT_QUEUED
from tests.support import Buyer, drain_until_empty, unique_email, wait_for_contact


def test_many_clients_cannot_flood_one_inbox_past_the_recipient_limit(host_factory, mail):
    host = host_factory(STOREFRONT_RECIPIENT_LIMIT_PER_DAY="3", STOREFRONT_RATE_LIMIT_PER_HOUR="100")
    victim = unique_email("victim")
    attackers = [Buyer(host.url) for _ in range(3)]

    answers = [attackers[n % 3].purchase({"email": victim}) for n in range(15)]

    statuses = [a.status_code for a in answers]
    assert statuses == [200] * 3 + [429] * 12
    refused = answers[-1]
    assert int(refused.headers["Retry-After"]) > 0
    assert refused.json()["error"]["code"] == "rate_limited"
    assert "STOREFRONT_RECIPIENT_LIMIT_PER_DAY" in refused.json()["error"]["message"]
    assert victim not in refused.text
    rate = next(c for c in refused.json()["checks"] if c["name"] == "rate_limit")
    assert rate["result"] == "fail" and len(refused.json()["checks"]) == 6
    assert len(mail.emails_to(victim)) == 3
    assert all(a.purchase().status_code == 200 for a in attackers), "other recipients are unaffected"


def test_a_refused_recipient_purchase_gives_its_rate_and_cost_back(host_factory, mail):
    host = host_factory(STOREFRONT_RECIPIENT_LIMIT_PER_DAY="1", STOREFRONT_RATE_LIMIT_PER_HOUR="3")
    buyer = Buyer(host.url)
    assert buyer.purchase().status_code == 200

    refused = [buyer.purchase() for _ in range(3)]

    assert [r.status_code for r in refused] == [429, 429, 429]
    assert all(r.json()["error"]["code"] == "rate_limited" for r in refused)
    assert buyer.purchase({"email": unique_email("other")}).status_code == 200


@pytest.mark.parametrize(
    "name",
    [
        "ACTION NEEDED: re-verify at https://evil.example/login",
        "Ada\u2028Visit evil.example now",
        "Ada www.evil.example",
        "Ada \u202eelpmaxe.live",
    ],
)
@pytest.mark.parametrize("channel", ["http", "mcp"])
def test_a_name_cannot_carry_a_link_into_a_strangers_inbox(buyer, mail, name, channel):
    victim = unique_email("victim")
    arguments = {"email": victim, "name": name}

    if channel == "http":
        receipt = buyer.purchase(arguments).json()
        status = receipt["error"]["code"]
    else:
        result = buyer.call_tool(arguments).json()["result"]
        assert result["isError"] is True
        status = result["structuredContent"]["error"]["code"]

    assert status == "invalid_name"
    assert mail.emails_to(victim) == []
    drain_until_empty(buyer.host)
    assert mail.contact(victim) is None


def test_a_strangers_purchase_never_rewrites_the_owners_contact(buyer, mail):
    owner = unique_email("owner")
    assert buyer.purchase({"email": owner, "name": "Ada"}).status_code == 200
    made = wait_for_contact(buyer.host, mail, owner)

    stranger = buyer.purchase({"email": owner, "name": "Mallory"})
    drain_until_empty(buyer.host)  # the stranger's buyer handed to Brevo too

    assert stranger.status_code == 200
    contact = next(c for c in stranger.json()["checks"] if c["name"] == "contact_upsert")
    assert contact == {"name": "contact_upsert", "result": "pass", "detail": CONTACT_QUEUED}
    after = mail.contact(owner)
    assert after["attributes"] == made["attributes"] == {"FIRSTNAME": "Ada"}
    assert (after["upserts"], after["modifications"]) == (1, 0)
