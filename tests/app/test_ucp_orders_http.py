"""UCP orders end to end through a dev host: a platform whose profile asks for order events gets
one, signed by the store with the key it publishes, the moment its checkout completes; it reads
the order back with a signed request; an unsigned or another platform's request gets nothing."""

from __future__ import annotations

import json
import uuid

import pytest
import requests

from tests.support import unique_email
from tests.ucp_platform import Platform, store_answer, verify_store_signature, webhook_message

LINE = {"line_items": [{"item": {"id": "agent-starter-kit"}, "quantity": 1}]}


@pytest.fixture(scope="module")
def shop(host_factory):
    return host_factory()


@pytest.fixture
def platform():
    platform = Platform()
    yield platform
    platform.close()


def completed(shop, platform: Platform, email: str) -> dict:
    url = f"{shop.url}/ucp/checkout-sessions"
    body = json.dumps({**LINE, "buyer": {"email": email, "first_name": "Ada"}}).encode()
    created = requests.post(
        url, data=body, headers=platform.signed("POST", url, body, str(uuid.uuid4())), timeout=30
    )
    complete = f"{url}/{created.json()['id']}/complete"
    done = requests.post(
        complete,
        data=b'{"payment":{}}',
        headers=platform.signed("POST", complete, b'{"payment":{}}', str(uuid.uuid4())),
        timeout=30,
    )
    assert done.status_code == 200, done.text
    return done.json()


def test_a_completed_checkout_sends_one_signed_order_event_and_the_order_reads_back(shop, platform, mail):
    checkout = completed(shop, platform, unique_email("order"))
    profile = requests.get(f"{shop.url}/.well-known/ucp", timeout=10).json()
    order_url = f"{shop.url}/ucp/orders/{checkout['order']['id']}"

    read = requests.get(order_url, headers=platform.signed("GET", order_url), timeout=30)

    [event] = platform.received
    headers = {name.lower(): value for name, value in event["headers"].items()}
    order = json.loads(event["body"])
    assert event["path"] == "/webhooks/orders"
    assert headers["ucp-agent"] == 'profile="http://localhost:7071/.well-known/ucp"'
    assert headers["webhook-id"] and int(headers["webhook-timestamp"]) > 0
    store_key = next(k for k in profile["keys"] if f'keyid="{k["kid"]}"' in headers["signature-input"])
    [result] = verify_store_signature(
        webhook_message(platform.webhook_url, event["headers"]), store_key, event["body"]
    )
    assert {'"@method"', '"@authority"', '"@path"', '"content-digest"', '"ucp-agent"', '"webhook-id"'} <= set(
        result.covered_components
    )
    assert order["id"] == checkout["order"]["id"] and order["checkout_id"] == checkout["id"]
    assert order["permalink_url"] == checkout["order"]["permalink_url"]
    assert [(line["status"], line["quantity"]["fulfilled"]) for line in order["line_items"]] == [
        ("fulfilled", 1)
    ]
    assert order["fulfillment"]["expectations"][0]["method_type"] == "digital"
    assert read.status_code == 200 and read.json() == order
    verify_store_signature(store_answer(200, read.headers), store_key, read.content)


def test_an_order_is_given_only_to_the_signed_platform_whose_checkout_it_was(shop, platform, mail):
    checkout = completed(shop, platform, unique_email("private"))
    order_url = f"{shop.url}/ucp/orders/{checkout['order']['id']}"
    stranger = Platform()
    try:
        unsigned = requests.get(order_url, headers={"UCP-Agent": platform.agent}, timeout=30)
        other = requests.get(order_url, headers=stranger.signed("GET", order_url), timeout=30)
        forged = requests.get(
            order_url, headers={**stranger.signed("GET", order_url), "UCP-Agent": platform.agent}, timeout=30
        )
        unknown = requests.get(
            f"{shop.url}/ucp/orders/ord_{'a' * 26}",
            headers=platform.signed("GET", f"{shop.url}/ucp/orders/ord_{'a' * 26}"),
            timeout=30,
        )
    finally:
        stranger.close()

    assert (unsigned.status_code, unsigned.json()["code"]) == (401, "signature_missing")
    assert other.status_code == 200 and [m["code"] for m in other.json()["messages"]] == ["not_found"]
    assert forged.status_code == 401, "a signature made for another UCP-Agent does not verify"
    assert unknown.status_code == 200 and unknown.json()["ucp"]["status"] == "error"


def test_an_event_the_platform_refuses_waits_for_the_timer_and_the_complete_still_succeeds(shop, mail):
    platform = Platform(500)
    try:
        checkout = completed(shop, platform, unique_email("refused"))
    finally:
        platform.close()

    assert checkout["status"] == "completed"
    assert len(platform.received) == 1, "one attempt at once; the timer retries (tests/shared/protocols)"


def test_a_signature_only_web_bot_auth_could_check_proves_no_platform(shop, platform, mail):
    checkout = completed(shop, platform, unique_email("forged"))
    order_url = f"{shop.url}/ucp/orders/{checkout['order']['id']}"
    forged = {
        "UCP-Agent": platform.agent,
        "Signature-Input": 'sig1=("@method");tag="web-bot-auth";keyid="x"',
        "Signature": "sig1=:AAAA:",
    }

    answer = requests.get(order_url, headers=forged, timeout=30)

    assert (answer.status_code, answer.json()["code"]) == (401, "signature_missing")


def test_an_unsigned_complete_naming_a_platform_sends_that_platform_no_event(shop, platform, mail):
    """Anyone may name any platform's profile without signing: its webhook must not be sent
    orders it never made."""
    url = f"{shop.url}/ucp/checkout-sessions"
    unsigned = {"UCP-Agent": platform.agent, "Content-Type": "application/json"}
    created = requests.post(
        url, json={**LINE, "buyer": {"email": unique_email("unsigned")}}, headers=unsigned, timeout=30
    )

    done = requests.post(
        f"{url}/{created.json()['id']}/complete", json={"payment": {}}, headers=unsigned, timeout=30
    )

    assert done.status_code == 200 and done.json()["status"] == "completed"
    assert platform.received == []


def test_a_webhook_url_the_store_cannot_send_to_never_fails_the_complete(shop, mail):
    platform = Platform()
    platform.webhook_url = "https://h/\u00e9 x"
    try:
        checkout = completed(shop, platform, unique_email("badhook"))
    finally:
        platform.close()

    assert checkout["status"] == "completed"
