"""The account behind the Brevo sandbox's api-key (``/_sandbox/account``): the sending-quota and
activation refusals Brevo answers on ``POST /v3/smtp/email``, over real HTTP.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from devstack.brevo_sandbox.server import make_server

pytestmark = pytest.mark.services  # starts processes or servers of its own

API_KEY = {"api-key": "test-key"}
NOT_ACTIVATED = (
    "Unable to send email. Your SMTP account is not yet activated. "
    "Please contact us at contact@brevo.com to request activation"
)


@pytest.fixture(scope="module")
def sandbox_url() -> Iterator[str]:
    server = make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://{}:{}".format(*server.server_address[:2])
    server.shutdown()
    server.server_close()


@pytest.fixture
def base(sandbox_url: str) -> str:
    requests.post(f"{sandbox_url}/_sandbox/reset", timeout=5).raise_for_status()
    return sandbox_url


def set_account(base: str, **account: Any) -> requests.Response:
    return requests.put(f"{base}/_sandbox/account", json=account, timeout=5)


def account(base: str) -> dict[str, Any]:
    return requests.get(f"{base}/_sandbox/account", timeout=5).json()


def send(base: str, *to: str, key: str | None = None) -> requests.Response:
    payload: dict[str, Any] = {
        "sender": {"email": "shop@example.com"},
        "to": [{"email": address} for address in to or ("customer@example.com",)],
        "subject": "Your order",
        "htmlContent": "<p>Thanks</p>",
    }
    if key:
        payload["headers"] = {"idempotencyKey": key}
    return requests.post(f"{base}/v3/smtp/email", json=payload, headers=API_KEY, timeout=5)


def captured(base: str) -> list[dict[str, Any]]:
    return requests.get(f"{base}/_sandbox/emails", timeout=5).json()


def test_the_account_starts_activated_with_no_credit_limit(base: str) -> None:
    assert account(base) == {"transactional": "active", "email_credits": None, "credits_status": 402}


def test_with_no_credits_left_an_email_is_refused_with_402_not_enough_credits(base: str) -> None:
    assert set_account(base, email_credits=2).json()["email_credits"] == 2
    assert [send(base).status_code, send(base).status_code] == [201, 201]
    key = str(uuid.uuid4())

    refused = send(base, key=key)

    assert refused.status_code == 402
    assert refused.json() == {
        "code": "not_enough_credits",
        "message": "You don't have enough credit to perform the request",
    }
    assert refused.headers["x-sib-ratelimit-limit"] == "1000"
    assert len(captured(base)) == 2 and account(base)["email_credits"] == 0
    set_account(base, email_credits=1)
    assert send(base, key=key).status_code == 201, "the refused email's key was not remembered"


def test_an_email_costs_one_credit_per_recipient(base: str) -> None:
    set_account(base, email_credits=1)

    assert send(base, "a@example.com", "b@example.com").status_code == 402
    assert send(base, "a@example.com").status_code == 201
    assert account(base)["email_credits"] == 0


def test_the_credits_refusal_can_come_as_the_400_some_accounts_report(base: str) -> None:
    set_account(base, email_credits=0, credits_status=400)

    refused = send(base)

    assert refused.status_code == 400 and refused.json()["code"] == "not_enough_credits"


def test_an_account_not_activated_for_transactional_email_is_refused_with_403(base: str) -> None:
    set_account(base, transactional="not_activated")

    refused = send(base)

    assert refused.status_code == 403
    assert refused.json() == {"code": "permission_denied", "message": NOT_ACTIVATED}
    assert captured(base) == []


def test_an_account_under_validation_is_refused_with_402(base: str) -> None:
    set_account(base, transactional="under_validation")

    refused = send(base)

    assert refused.status_code == 402
    assert refused.json() == {
        "code": "account_under_validation",
        "message": "Your account is under validation",
    }


def test_a_repeated_key_is_still_a_duplicate_when_credits_ran_out(base: str) -> None:
    key = str(uuid.uuid4())
    set_account(base, email_credits=1)
    assert send(base, key=key).status_code == 201

    repeat = send(base, key=key)

    assert repeat.status_code == 400 and repeat.json()["code"] == "duplicate_parameter"


def test_reset_gives_back_an_active_account_without_limit(base: str) -> None:
    set_account(base, transactional="not_activated", email_credits=0)

    requests.post(f"{base}/_sandbox/reset", timeout=5).raise_for_status()

    assert send(base).status_code == 201
    assert account(base)["transactional"] == "active"


@pytest.mark.parametrize(
    "body",
    [
        {"email_credits": -1},
        {"email_credits": "10"},
        {"email_credits": True},
        {"transactional": "suspended"},
        {"credits_status": 403},
        {"credits": 5},
    ],
    ids=str,
)
def test_a_bad_account_is_refused_and_changes_nothing(base: str, body: dict[str, Any]) -> None:
    answer = set_account(base, **body)

    assert answer.status_code == 400 and answer.json()["code"] == "invalid_parameter"
    assert account(base)["email_credits"] is None
