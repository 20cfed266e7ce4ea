"""UCP checkout sessions end to end through a dev host, Azurite and the Brevo sandbox: create,
update, complete and cancel as a platform calls them; the complete's purchase is the store's own
(one email, the receipt with the six checks); UCP's Idempotency-Key rule; a session belongs to its
platform; concurrent completes send one email."""

from __future__ import annotations

import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from shared.protocols.ucp.checkout import CHECKOUT
from shared.purchase.receipt.document import CHECK_NAMES
from tests.support import ROOT, json_answers_of, unique_email
from tests.ucp_platform import Platform, store_answer, verify_store_signature

APPROVED = "https://platform.example/profile"
OTHER = "https://other.example/profile"


@pytest.fixture(scope="module")
def shop(host_factory):
    return host_factory(STOREFRONT_UCP_PLATFORMS=f"{APPROVED},{OTHER}")


def headers(key: str | None = None, platform: str = APPROVED) -> dict[str, str]:
    sent = {"UCP-Agent": f'profile="{platform}"', "Content-Type": "application/json"}
    return {**sent, "Idempotency-Key": key or str(uuid.uuid4())}


def create(shop, body: dict, **kwargs) -> requests.Response:
    return requests.post(
        f"{shop.url}/ucp/checkout-sessions", json=body, headers=headers(**kwargs), timeout=30
    )


def act(shop, checkout_id: str, action: str, body: dict | None = None, **kwargs) -> requests.Response:
    url = f"{shop.url}/ucp/checkout-sessions/{checkout_id}"
    if action == "get":
        return requests.get(url, headers=headers(**kwargs), timeout=30)
    if action == "update":
        return requests.put(url, json=body, headers=headers(**kwargs), timeout=30)
    return requests.post(
        f"{url}/{action}", json=body if body is not None else {}, headers=headers(**kwargs), timeout=30
    )


LINE = {"line_items": [{"item": {"id": "agent-starter-kit"}, "quantity": 1}]}
FREE = {"payment": {}}


def test_a_checkout_without_an_email_is_incomplete_until_updated_then_completes_with_one_email(shop, mail):
    email = unique_email("ucp")

    created = create(shop, LINE)
    checkout_id = created.json()["id"]
    updated = act(shop, checkout_id, "update", {**LINE, "buyer": {"email": email, "first_name": "Ada"}})
    completed = act(shop, checkout_id, "complete", FREE)
    read = act(shop, checkout_id, "get")

    assert created.status_code == 201, created.text
    first = created.json()
    assert first["status"] == "incomplete"
    assert [(m["code"], m["path"], m["severity"]) for m in first["messages"]] == [
        ("missing", "$.buyer.email", "recoverable")
    ]
    assert first["ucp"]["capabilities"] == {CHECKOUT: [{"version": "2026-08-25"}]}
    assert first["totals"] == [{"type": "subtotal", "amount": 0}, {"type": "total", "amount": 0}]
    assert first["line_items"][0]["item"] == {
        "id": "agent-starter-kit",
        "title": "Agent Starter Kit",
        "price": 0,
    }
    assert updated.status_code == 200 and updated.json()["status"] == "ready_for_complete"
    assert "messages" not in updated.json()
    assert completed.status_code == 200, completed.text
    done = completed.json()
    assert done["status"] == "completed" and "expires_at" not in done
    assert read.json() == done
    assert done["order"]["permalink_url"] == f"http://localhost:7071/api/receipts/{done['order']['label']}"
    receipt = requests.get(f"{shop.url}/api/receipts/{done['order']['label']}", timeout=10).json()
    assert receipt["receipt_id"] == done["order"]["label"] and done["order"]["id"] == "ord_" + checkout_id[4:]
    assert receipt["status"] == "fulfilled" and receipt["caller"]["channel"] == "ucp"
    assert [c["name"] for c in receipt["checks"]] == list(CHECK_NAMES)
    assert {c["result"] for c in receipt["checks"]} == {"pass"}, "the checkout's id is the purchase's key"
    emails = mail.emails_to(email)
    assert len(emails) == 1 and "Ada" in emails[0]["htmlContent"]


def test_a_replayed_complete_is_the_same_bytes_and_sends_nothing_and_a_new_complete_is_a_409(shop, mail):
    email = unique_email("replay")
    checkout_id = create(shop, {**LINE, "buyer": {"email": email}}).json()["id"]
    key = str(uuid.uuid4())

    first = act(shop, checkout_id, "complete", FREE, key=key)
    again = act(shop, checkout_id, "complete", FREE, key=key)
    other_body = act(shop, checkout_id, "complete", {"payment": {"instruments": []}}, key=key)
    new_key = act(shop, checkout_id, "complete", FREE)

    assert first.status_code == again.status_code == 200
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"
    assert (other_body.status_code, other_body.json()["code"]) == (409, "idempotency_conflict")
    assert (new_key.status_code, new_key.json()["code"]) == (409, "checkout_not_modifiable")
    assert len(mail.emails_to(email)) == 1


def test_a_canceled_checkout_cannot_change_or_complete(shop, mail):
    email = unique_email("cancel")
    checkout_id = create(shop, {**LINE, "buyer": {"email": email}}).json()["id"]

    canceled = act(shop, checkout_id, "cancel")
    answers = [
        act(shop, checkout_id, "update", LINE),
        act(shop, checkout_id, "complete", FREE),
        act(shop, checkout_id, "cancel"),
    ]

    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
    assert [(a.status_code, a.json()["code"]) for a in answers] == [(409, "checkout_not_modifiable")] * 3
    assert mail.emails_to(email) == []


def test_a_session_is_found_only_by_the_platform_that_created_it(shop):
    checkout_id = create(shop, LINE).json()["id"]

    for answer in (
        act(shop, checkout_id, "get", platform=OTHER),
        act(shop, checkout_id, "update", LINE, platform=OTHER),
        act(shop, "chk_" + "a" * 26, "get"),
        act(shop, "not-an-id", "get"),
    ):
        assert answer.status_code == 200
        assert answer.json()["ucp"]["status"] == "error"
        assert [m["code"] for m in answer.json()["messages"]] == ["not_found"]
    assert act(shop, checkout_id, "get").json()["status"] == "incomplete"


def test_unknown_items_extra_quantity_and_a_refused_address_are_messages_not_failures(shop, mail):
    nothing = create(shop, {"line_items": [{"item": {"id": "pink-wumpus"}, "quantity": 1}]})
    mixed = create(
        shop,
        {
            "line_items": [
                {"item": {"id": "pink-wumpus"}, "quantity": 1},
                {"item": {"id": "mcp-field-guide", "price": 1000}, "quantity": 3},
            ],
            "buyer": {"email": "not-an-address"},
        },
    )
    refused = act(shop, mixed.json()["id"], "complete", FREE)

    assert nothing.status_code == 200 and nothing.json()["ucp"]["status"] == "error"
    assert [m["code"] for m in nothing.json()["messages"]] == ["item_unavailable"]
    body = mixed.json()
    assert mixed.status_code == 201 and body["status"] == "incomplete"
    assert [(line["item"]["id"], line["item"]["price"], line["quantity"]) for line in body["line_items"]] == [
        ("mcp-field-guide", 0, 1)
    ]
    codes = [(m["type"], m["code"], m.get("path")) for m in body["messages"]]
    assert codes == [
        ("error", "item_unavailable", None),
        ("warning", "quantity_adjusted", "$.line_items[0].quantity"),
        ("error", "invalid_email", "$.buyer.email"),
    ]
    assert refused.status_code == 200 and refused.json()["status"] == "incomplete"


@pytest.mark.parametrize(
    "body, status",
    [
        ({"line_items": []}, 400),
        ({"line_items": [{"item": {}, "quantity": 1}]}, 400),
        ({"line_items": [{"item": {"id": "agent-starter-kit"}, "quantity": 0}]}, 400),
        ({**LINE, "buyer": "ada"}, 400),
        ([1, 2], 400),
    ],
)
def test_a_malformed_create_is_a_400_in_ucps_error_shape(shop, body, status):
    answer = create(shop, body)

    assert answer.status_code == status
    assert set(answer.json()) == {"code", "content"}


def test_twenty_concurrent_completes_send_one_email_and_agree_on_one_order(shop, mail):
    email = unique_email("race")
    checkout_id = create(shop, {**LINE, "buyer": {"email": email}}).json()["id"]

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(lambda _: act(shop, checkout_id, "complete", FREE), range(20)))

    completed = [a.json() for a in answers if a.status_code == 200 and a.json().get("status") == "completed"]
    assert completed, [a.text[:200] for a in answers]
    assert {c["order"]["id"] for c in completed} == {act(shop, checkout_id, "get").json()["order"]["id"]}
    held = [a for a in answers if a.status_code != 200]
    # Busy (the purchase, or the session), or arrived after it completed: no other answer.
    codes = {"complete_in_progress", "request_in_progress", "checkout_not_modifiable"}
    assert all(a.status_code == 409 and a.json()["code"] in codes for a in held)
    assert all(int(a.headers["Retry-After"]) >= 1 for a in held)
    assert len(mail.emails_to(email)) == 1


def test_a_create_retried_with_its_key_makes_one_session(shop):
    key = str(uuid.uuid4())

    first = create(shop, LINE, key=key)
    again = create(shop, LINE, key=key)

    assert first.status_code == again.status_code == 201
    assert first.content == again.content


def test_a_payment_credential_sent_with_a_free_complete_is_never_echoed(shop):
    email = unique_email("credential")
    checkout_id = create(shop, {**LINE, "buyer": {"email": email}}).json()["id"]
    token = f"tok_{uuid.uuid4().hex}"
    instrument = {
        "id": "pi_1",
        "handler_id": "none",
        "type": "card",
        "credential": {"type": "token", "token": token},
    }

    two = act(shop, checkout_id, "complete", {"payment": {"instruments": [instrument, instrument]}})
    one = act(shop, checkout_id, "complete", {"payment": {"instruments": [instrument]}})

    assert two.status_code == 200 and two.json()["status"] == "ready_for_complete"
    assert [m["code"] for m in two.json()["messages"]] == ["payment_failed"]
    assert one.status_code == 200 and one.json()["status"] == "completed"
    assert token not in one.text and token not in act(shop, checkout_id, "get").text


def test_the_docs_checkout_snippet_runs_as_the_page_says(shop, mail, tmp_path):
    (block,) = re.findall(r"^```bash\n(.*?)^```", (ROOT / "docs" / "ucp.md").read_text(), re.M | re.S)
    email = unique_email("docs")
    code = block.replace("http://localhost:7071", shop.url).replace("ada@example.org", email)

    created, updated, completed = json_answers_of(code, tmp_path)

    assert created["status"] == "incomplete"
    assert [m["path"] for m in created["messages"]] == ["$.buyer.email"]
    assert updated["status"] == "ready_for_complete"
    assert completed["status"] == "completed" and completed["order"]["permalink_url"].endswith(
        completed["order"]["label"]
    )
    assert len(mail.emails_to(email)) == 1


def test_a_signing_platform_is_verified_with_its_profiles_keys_and_the_complete_answer_is_signed(shop, mail):
    platform = Platform(order=False)
    email = unique_email("signed")
    body = json.dumps({**LINE, "buyer": {"email": email}}).encode()
    url = f"{shop.url}/ucp/checkout-sessions"
    try:
        sent = platform.signed("POST", url, body, key=str(uuid.uuid4()))
        created = requests.post(url, data=body, headers=sent, timeout=30)
        tampered = requests.post(url, data=body.replace(b"agent", b"AGENT"), headers=sent, timeout=30)
        other_key = requests.post(
            url, data=body, headers={**sent, "Idempotency-Key": str(uuid.uuid4())}, timeout=30
        )
        complete_url = f"{url}/{created.json()['id']}/complete"
        sent = platform.signed("POST", complete_url, b'{"payment":{}}', key=str(uuid.uuid4()))
        completed = requests.post(complete_url, data=b'{"payment":{}}', headers=sent, timeout=30)
        replayed = requests.post(complete_url, data=b'{"payment":{}}', headers=sent, timeout=30)
        profile = requests.get(f"{shop.url}/.well-known/ucp", timeout=10).json()
    finally:
        platform.close()

    assert created.status_code == 201, created.text
    assert (tampered.status_code, tampered.json()["code"]) == (400, "digest_mismatch")
    assert (other_key.status_code, other_key.json()["code"]) == (401, "signature_invalid")
    assert completed.status_code == 200 and completed.json()["status"] == "completed"
    store_key = next(
        k for k in profile["keys"] if f'keyid="{k["kid"]}"' in completed.headers["Signature-Input"]
    )
    verify_store_signature(store_answer(200, completed.headers), store_key, completed.content)
    assert (replayed.content, replayed.headers["Signature"]) == (
        completed.content,
        completed.headers["Signature"],
    )
    assert len(mail.emails_to(email)) == 1


@pytest.fixture(scope="module")
def impatient(host_factory):
    """A store that gives Brevo one second: a slower answer is a timeout, though the email goes."""
    return host_factory(STOREFRONT_UCP_PLATFORMS=APPROVED, STOREFRONT_BREVO_TIMEOUT_SECONDS="1")


def test_a_complete_whose_email_may_have_gone_keeps_the_checkout_held_until_it_finishes(impatient, mail):
    email, other = unique_email("late"), unique_email("other")
    checkout_id = create(impatient, {**LINE, "buyer": {"email": email}}).json()["id"]
    fault = {"path": "/v3/smtp/email", "delay_seconds": 3, "match": email}
    requests.post(f"{mail.url}/_sandbox/faults", json=fault, timeout=10).raise_for_status()

    lost = act(impatient, checkout_id, "complete", FREE)
    held = act(impatient, checkout_id, "get").json()
    moved = act(impatient, checkout_id, "update", {**LINE, "buyer": {"email": other}})
    canceled = act(impatient, checkout_id, "cancel")
    deadline = time.monotonic() + 15
    while not mail.emails_to(email) and time.monotonic() < deadline:
        time.sleep(0.2)
    finished = act(impatient, checkout_id, "complete", FREE)

    assert lost.status_code == 503 and "stays held" in lost.json()["content"]
    assert held["status"] == "complete_in_progress"
    assert moved.status_code == 200 and moved.json()["status"] == "complete_in_progress"
    assert moved.json()["buyer"]["email"] == email, "the buyer cannot change once an email may be out"
    assert (canceled.status_code, canceled.json()["code"]) == (409, "checkout_not_modifiable")
    assert finished.status_code == 200 and finished.json()["status"] == "completed", finished.text
    assert len(mail.emails_to(email)) == 1 and mail.emails_to(other) == []


def test_a_method_a_checkout_path_does_not_serve_is_a_405_in_ucps_shape(shop):
    checkout_id = create(shop, LINE).json()["id"]

    answer = requests.delete(f"{shop.url}/ucp/checkout-sessions/{checkout_id}", headers=headers(), timeout=10)

    assert (answer.status_code, answer.headers["Allow"]) == (405, "GET, HEAD, PUT")
    assert set(answer.json()) == {"code", "content"}


def test_the_operators_terms_and_privacy_policy_are_every_checkouts_links(host_factory):
    shop = host_factory(
        STOREFRONT_UCP_PLATFORMS=APPROVED,
        STOREFRONT_TERMS_URL="https://shop.example/terms",
        STOREFRONT_PRIVACY_URL="https://shop.example/privacy",
    )
    created = create(shop, LINE).json()

    read = act(shop, created["id"], "get").json()

    expected = [
        {"type": "terms_of_service", "url": "https://shop.example/terms"},
        {"type": "privacy_policy", "url": "https://shop.example/privacy"},
    ]
    assert created["links"] == read["links"] == expected
