"""A UCP platform nobody here wrote the models of: UCP's official SDK (`ucp-sdk`, the 2026-08-25
shapes) with httpx discovers the store from its profile, creates a checkout, gives the email it
was asked for, completes it and reads it back. One email goes out; the order is a receipt with the
same checks a purchase through the store's own HTTP door carries; a retried complete sends nothing."""

from __future__ import annotations

import uuid

import httpx
import pytest
from ucp_sdk.models.schemas.common.types.error_response import ErrorResponse
from ucp_sdk.models.schemas.profile import UcpProfileDocument
from ucp_sdk.models.schemas.shopping.checkout import Checkout
from ucp_sdk.models.schemas.shopping.checkout_complete_request import CheckoutCompleteRequest
from ucp_sdk.models.schemas.shopping.checkout_create_request import CheckoutCreateRequest
from ucp_sdk.models.schemas.shopping.checkout_update_request import CheckoutUpdateRequest

from tests.support import unique_email

PLATFORM = "https://platform.example/.well-known/ucp"


@pytest.fixture(scope="module")
def shop(host_factory):
    """A dev host whose public address is its own, so the profile's endpoint is reachable."""
    return host_factory(own_address=True, STOREFRONT_UCP_PLATFORMS=PLATFORM)


def headers(key: str | None = None) -> dict[str, str]:
    return {
        "UCP-Agent": f'profile="{PLATFORM}"',
        "Idempotency-Key": key or str(uuid.uuid4()),
        "Request-Id": str(uuid.uuid4()),
    }


def dump(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_the_official_models_discover_create_update_and_complete_a_checkout(shop, mail):
    email = unique_email("sdk")
    with httpx.Client(timeout=30) as http:
        profile = UcpProfileDocument.model_validate(http.get(f"{shop.url}/.well-known/ucp").json())
        [rest] = [s for s in profile.ucp.services["dev.ucp.shopping"] if s.transport == "rest"]
        endpoint = str(rest.endpoint).rstrip("/")
        create = CheckoutCreateRequest.model_validate(
            {"line_items": [{"item": {"id": "mcp-field-guide"}, "quantity": 1}]}
        )
        created = http.post(f"{endpoint}/checkout-sessions", headers=headers(), json=dump(create))
        assert created.status_code == 201, created.text
        checkout = Checkout.model_validate(created.json())
        asked = [(m.code, m.path) for m in checkout.messages or []]
        update = CheckoutUpdateRequest.model_validate(
            {
                "line_items": [
                    {"id": li.id, "item": {"id": li.item.id}, "quantity": li.quantity}
                    for li in checkout.line_items
                ],
                "buyer": {"email": email, "first_name": "Grace", "last_name": "Hopper"},
            }
        )
        ready = Checkout.model_validate(
            http.put(
                f"{endpoint}/checkout-sessions/{checkout.id}", headers=headers(), json=dump(update)
            ).json()
        )
        complete = CheckoutCompleteRequest.model_validate({"payment": {"instruments": []}})
        key = str(uuid.uuid4())
        done = http.post(
            f"{endpoint}/checkout-sessions/{checkout.id}/complete", headers=headers(key), json=dump(complete)
        )
        retried = http.post(
            f"{endpoint}/checkout-sessions/{checkout.id}/complete", headers=headers(key), json=dump(complete)
        )
        completed = Checkout.model_validate(done.json())
        read = Checkout.model_validate(
            http.get(f"{endpoint}/checkout-sessions/{checkout.id}", headers=headers()).json()
        )
        missing = http.get(f"{endpoint}/checkout-sessions/chk_{'a' * 26}", headers=headers()).json()
        receipt = http.get(str(completed.order.permalink_url)).json()
        direct = http.post(
            f"{shop.url}/api/a2a/purchase",
            json={"email": unique_email("door"), "bundle_id": "mcp-field-guide"},
        ).json()

    assert str(profile.ucp.version) == "2026-08-25"
    assert asked == [("missing", "$.buyer.email")]
    assert checkout.status == "incomplete" and ready.status == "ready_for_complete"
    assert completed.status == "completed" and read == completed
    assert retried.content == done.content
    assert [m.code for m in ErrorResponse.model_validate(missing).messages] == ["not_found"]
    assert receipt["receipt_id"] == completed.order.label and receipt["bundle"]["id"] == "mcp-field-guide"
    assert [(c["name"], c["result"]) for c in receipt["checks"]] == [
        (c["name"], "pass" if c["name"] == "idempotency" else c["result"]) for c in direct["checks"]
    ], "the same six checks as the store's own door (which was sent no key)"
    emails = mail.emails_to(email)
    assert len(emails) == 1 and "Grace Hopper" in emails[0]["htmlContent"]
