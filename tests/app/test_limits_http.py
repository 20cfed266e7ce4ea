"""The limits count people and mailboxes, end to end through dev hosts on the session's Azurite and
Brevo sandbox: one inbox behind many spellings, clients behind the operator's proxies or Front
Door, and a cost counter past what an Int32 holds."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.seams.storage import table_client
from tests.app.test_caller_neutrality import CHANNELS
from tests.support import Buyer, drain_until_empty, unique_email

FRONT_DOOR = "3f6b1d2e-8a4c-4f0e-b5d7-9c2a1e6f4b80"


def refused_for_rate(receipt: dict) -> bool:
    return (receipt.get("error") or {}).get("code") == "rate_limited"


# --- one mailbox, many spellings ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def mailbox_host(host_factory):
    return host_factory(STOREFRONT_RECIPIENT_LIMIT_PER_DAY="3", STOREFRONT_RATE_LIMIT_PER_HOUR="100")


# Per family: three spellings of one inbox, a fourth, and another inbox's address beside them,
# for the user name `{f}.{l}` ({F}.{L} in capitals).
SPELLINGS = {
    "gmail": "{f}{l}+1@gmail.com {f}.{l}@googlemail.com {F}.{L}@gmail.com {f}{l}+4@gmail.com "
    "{f}{l}x@gmail.com",
    "example.org": "{f}.{l}+1@example.org {f}.{l}+2@example.org {F}.{L}+x@Example.org {f}.{l}+4@example.org "
    "{f}{l}@example.org",
    # Proton's transparent . _ - on its four domains: one inbox, once six counts.
    "proton": "{f}.{l}@proton.me {f}{l}@pm.me {f}-{l}@protonmail.com {f}_{l}@protonmail.ch {f}{l}x@proton.me",
    # One Yandex login on all its domains, a dot and a hyphen alike; the dotless name is another.
    "yandex": "{f}.{l}@yandex.ru {f}-{l}@ya.ru {f}.{l}+x@yandex.com {f}-{l}@yandex.kz {f}{l}@yandex.ru",
    # Fastmail's subdomain addressing on sent.com, the user name's _ written - there.
    "fastmail": "{f}_{l}@sent.com shop@{f}-{l}.sent.com {f}_{l}+x@sent.com news@{f}-{l}.sent.com "
    "{f}_{l}@fastmail.com",
    # A Firefox Relay user's own subdomain: any user name there is one mailbox.
    "relay": "shop@{f}{l}.mozmail.com news+x@{f}{l}.mozmail.com Bank@{F}{L}.MozMail.com "
    "a.b@{f}{l}.mozmail.com {f}{l}@mozmail.com",
}


@pytest.mark.parametrize("family", SPELLINGS)
def test_spellings_of_one_inbox_get_the_recipient_limit_together(mailbox_host, mail, family):
    first, last = f"victim{uuid.uuid4().hex[:8]}", "lovelace"
    names = {"f": first, "l": last, "F": first.upper(), "L": last.upper()}
    *spell, fourth, other = SPELLINGS[family].format(**names).split()
    attackers = [Buyer(mailbox_host.url) for _ in range(4)]

    answers = [
        attacker.purchase({"email": email})
        for attacker, email in zip(attackers, [*spell, fourth], strict=True)
    ]

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    assert answers[-1].json()["error"]["code"] == "rate_limited"
    assert "one mailbox" in answers[-1].json()["error"]["message"]
    for email in spell:  # each email went where the buyer asked, to the address as typed
        assert [e["to"][0]["email"] for e in mail.emails_to(email)] == [email.strip().lower()]
    assert mail.emails_to(fourth) == []
    # Every admitted spelling became a contact, the refused one did not: at most the recipient
    # limit of contacts per mailbox a day.
    drain_until_empty(mailbox_host.url)
    assert all(mail.contact(email) is not None for email in spell)
    assert mail.contact(fourth) is None
    assert attackers[0].purchase({"email": other}).status_code == 200, "another mailbox"


def test_a_fake_a_label_is_refused_and_uses_up_no_ones_limit(mailbox_host, mail):
    """IDNA 2003 read xn--gmail-2ha.com (gmail and a soft hyphen) as gmail.com: strangers could
    use up a Gmail user's limit with emails that never reached her."""
    victim = f"grace.hopper{uuid.uuid4().hex[:8]}"
    stranger = Buyer(mailbox_host.url)

    refused = [stranger.purchase({"email": f"{victim}+{n}@xn--gmail-2ha.com"}) for n in range(4)]

    assert [(a.status_code, a.json()["error"]["code"]) for a in refused] == [(422, "invalid_email")] * 4
    assert mail.emails_to(f"{victim}+0@xn--gmail-2ha.com") == []
    buyer = Buyer(mailbox_host.url, email=f"{victim}@gmail.com")
    assert [buyer.purchase().status_code for _ in range(4)] == [200, 200, 200, 429]


@pytest.mark.parametrize(
    ("full", "other"),
    [
        ("{}@example.org", "{}-luc@example.org"),
        ("{}@yahoo.eu.org", "{}-luc@yahoo.eu.org"),
        ("{}@xn--strae-oqa.de", "{}@strasse.de"),
    ],
    ids=["a-hyphen-outside-yahoo", "a-hyphen-on-a-yahoo-named-domain", "strasse-beside-strasse-with-sharp-s"],
)
def test_another_mailbox_beside_a_full_one_gets_its_own_limit(mailbox_host, full, other):
    """A hyphen is a tag only on Yahoo's own domains (not on yahoo.eu.org); straße.de and
    strasse.de are two registrable names (IDNA 2008 keeps ß), so two mailboxes."""
    local = "jean" + uuid.uuid4().hex[:10]
    buyer = Buyer(mailbox_host.url, email=full.format(local))
    assert [buyer.purchase().status_code for _ in range(3)] == [200, 200, 200]

    assert buyer.purchase({"email": other.format(local)}).status_code == 200
    assert buyer.purchase().status_code == 429


# --- clients behind the operator's proxies -----------------------------------------------------------


@pytest.fixture(scope="module")
def proxied_host(host_factory):
    """A store behind one proxy of the operator's own, or its Front Door: two purchases an hour."""
    return host_factory(
        STOREFRONT_RATE_LIMIT_PER_HOUR="2",
        STOREFRONT_TRUSTED_PROXY_HOPS="1",
        STOREFRONT_FRONT_DOOR_ID=FRONT_DOOR,
    )


def test_clients_behind_one_trusted_proxy_each_get_their_own_rate_limit(proxied_host):
    proxy = Buyer(proxied_host.url)  # one TCP peer, forwarding for every client
    alice, bob = "192.0.2.10", "192.0.2.11"

    def via_proxy(client: str, forwarded: str | None = None):
        entries = f"{forwarded}, {client}" if forwarded else client  # the proxy appends its peer
        return proxy.purchase({"email": unique_email()}, headers={"X-Forwarded-For": entries}).status_code

    assert [via_proxy(alice), via_proxy(alice), via_proxy(alice)] == [200, 200, 429]
    assert via_proxy(bob) == 200, "one client's limit is not everyone's"
    # Alice writes her own X-Forwarded-For: it stays left of what the proxy appended.
    assert via_proxy(alice, forwarded="192.0.2.99") == 429
    assert via_proxy(alice, forwarded=f"{bob}, 192.0.2.98") == 429


def test_a_request_around_the_trusted_proxy_counts_as_unknown_not_as_its_own_peer(proxied_host):
    """Too few X-Forwarded-For entries for the hops: one shared bucket, never the peer's own."""
    answers = [Buyer(proxied_host.url).purchase() for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]


def front_door(socket_ip: str, fdid: str = FRONT_DOOR, claimed: str = "198.51.100.250") -> dict[str, str]:
    """What Front Door adds: its id, the address that connected to it, and the client address
    the request claimed (taken from the client's own X-Forwarded-For)."""
    return {"X-Azure-FDID": fdid, "X-Azure-SocketIP": socket_ip, "X-Azure-ClientIP": claimed}


def fresh_ipv6() -> str:
    return f"2001:db8:{uuid.uuid4().hex[:4]}:{uuid.uuid4().hex[:4]}::1"


def test_clients_of_the_operators_front_door_count_by_the_address_that_connected(proxied_host):
    carol, dave = fresh_ipv6(), fresh_ipv6()
    # Every request reaches the app from another Front Door edge (another TCP peer).
    answers = [Buyer(proxied_host.url).purchase(headers=front_door(carol)) for _ in range(3)]

    assert [a.status_code for a in answers] == [200, 200, 429]
    assert Buyer(proxied_host.url).purchase(headers=front_door(dave)).status_code == 200
    spoofed = {**front_door(carol, claimed=dave), "X-Forwarded-For": dave}
    assert Buyer(proxied_host.url).purchase(headers=spoofed).status_code == 429


@pytest.mark.parametrize("fdid", [None, "00000000-0000-0000-0000-000000000000", FRONT_DOOR[:-1]])
def test_front_door_headers_without_the_operators_id_are_ignored(proxied_host, fdid):
    """A client that writes Front Door's headers itself is counted by X-Forwarded-For."""
    erin = fresh_ipv6()
    proxy = Buyer(proxied_host.url)
    statuses = []
    for _ in range(3):
        headers = {**front_door(fresh_ipv6(), fdid=fdid or ""), "X-Forwarded-For": erin}
        if fdid is None:
            del headers["X-Azure-FDID"]
        statuses.append(proxy.purchase({"email": unique_email()}, headers=headers).status_code)

    assert statuses == [200, 200, 429]


def test_every_channel_counts_the_front_door_client_in_one_bucket(proxied_host):
    frank = fresh_ipv6()
    receipts = {}
    for channel, buy in CHANNELS.items():
        buyer = Buyer(proxied_host.url)  # its own TCP peer, the same client behind Front Door
        buyer.http.headers.update(front_door(frank))
        receipts[channel] = buy(buyer, {"email": buyer.email})

    assert [refused_for_rate(receipts[c]) for c in CHANNELS] == [False, False, True, True]


def test_by_default_a_clients_own_forwarding_and_front_door_headers_are_ignored(host_factory):
    host = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="2")
    buyer = Buyer(host.url)
    forged = [
        {"X-Forwarded-For": "192.0.2.1"},
        {"X-Forwarded-For": "192.0.2.2, 192.0.2.3", **front_door(fresh_ipv6())},
        front_door(fresh_ipv6()),
    ]

    assert [buyer.purchase(headers=h).status_code for h in forged] == [200, 200, 429]


# --- a cost counter past an Int32 ---------------------------------------------------------------------

NEAR_INT32 = 2_147_480_000  # $2,147.48 in millionths, as the previous version stored it


def test_a_cost_counter_past_an_int32_answers_receipts_and_gives_reservations_back(host_factory, azurite):
    name = "govbig" + uuid.uuid4().hex[:8]
    table = table_client(azurite, name, timeout=5)
    table.create_table()
    day = datetime.now(timezone.utc).strftime("cost-%Y-%m-%d")
    table.create_entity({"PartitionKey": "store-cost-0", "RowKey": day, "Count": NEAR_INT32})
    queue = FaultProxy(endpoint_port(azurite, "Queue")).start()
    try:
        host = host_factory(
            AzureWebJobsStorage=proxied(azurite, queue=queue),
            STOREFRONT_GOVERNANCE_TABLE=name,
            STOREFRONT_DAILY_COST_CEILING_USD="20000",
            STOREFRONT_COST_COUNTER_SHARDS="1",
            STOREFRONT_RATE_LIMIT_PER_HOUR="5",
        )
        buyer = Buyer(host.url)

        fulfilled = buyer.purchase()
        queue.set("cut")  # the next buyer cannot be queued to become a contact: it fails before the email
        failed = buyer.purchase({"email": unique_email("failed")})
    finally:
        queue.stop()

    assert fulfilled.status_code == 200 and fulfilled.json()["status"] == "fulfilled"
    assert (failed.status_code, failed.json()["error"]["code"]) == (503, "store_unavailable")
    counters = [e for e in table.list_entities() if e["PartitionKey"] != "lease"]  # not the drainer's lease
    counts = {(e["RowKey"].split("-")[0], e["PartitionKey"]): int(e["Count"]) for e in counters}
    assert counts.pop(("cost", "store-cost-0")) == NEAR_INT32 + 10_000  # the failed purchase's is back
    assert sorted(n for (kind, _), n in counts.items() if kind == "rate") == [1]
    assert sorted(n for (kind, _), n in counts.items() if kind == "recipient") == [0, 1]
    table.delete_table()
    table.close()
