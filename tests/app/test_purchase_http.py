"""The purchase flow end to end: real HTTP to the dev host, Azurite, the Brevo sandbox."""

from __future__ import annotations

import json
import uuid

import pytest

from devstack.services import dev_settings
from shared.config.settings import Settings
from shared.purchase.receipt.document import CHECK_NAMES
from tests.support import UNKNOWN_BUNDLE_ID, Buyer, drain_until_empty, unique_email, wait_for_contact


def checks(receipt: dict) -> dict[str, str]:
    return {c["name"]: c["result"] for c in receipt["checks"]}


def test_purchase_returns_fulfilled_receipt_and_sends_one_email(buyer, mail):
    response = buyer.purchase({"email": buyer.email, "name": "Ada"})

    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    receipt = response.json()
    assert receipt["status"] == "fulfilled"
    assert [c["name"] for c in receipt["checks"]] == list(CHECK_NAMES)
    assert checks(receipt) == {
        "idempotency": "skipped",
        "input_schema": "pass",
        "rate_limit": "pass",
        "cost_ceiling": "pass",
        "contact_upsert": "pass",
        "fulfillment_email": "pass",
    }
    assert receipt["bundle"]["id"] == "agent-starter-kit"
    assert receipt["billing"]["amount"] == "0.00"
    assert receipt["caller"]["channel"] == "http"
    assert buyer.email not in response.text
    assert receipt["buyer"]["hint"].startswith(buyer.email[0] + "***@e***.")
    emails = mail.emails_to(buyer.email)
    assert len(emails) == 1
    assert any("/api/download/" in link for link in emails[0]["links"])
    assert "Ada" in emails[0]["htmlContent"]
    contact = wait_for_contact(buyer.host, mail, buyer.email)
    assert (contact["attributes"], contact["upserts"]) == ({"FIRSTNAME": "Ada"}, 1)


def test_download_link_carries_a_token_signed_for_the_bundle(buyer, mail):
    from jose import jwt

    receipt = buyer.purchase({"email": buyer.email, "bundle_id": "mcp-field-guide"}).json()
    link = next(link for link in mail.emails_to(buyer.email)[0]["links"] if "/api/download/" in link)
    token = link.rsplit("/", 1)[1]
    header = jwt.get_unverified_header(token)
    claims = jwt.get_unverified_claims(token)
    assert header["alg"] == "ES256" and header["kid"]
    assert claims["sub"] == "mcp-field-guide"
    assert claims["aud"] == "storefront-download"
    assert claims["jti"] == receipt["download"]["token_id"]
    assert claims["exp"] > claims["iat"]
    assert token not in json.dumps(receipt)


def test_receipt_url_serves_the_stored_receipt_byte_for_byte(buyer):
    response = buyer.purchase()
    receipt = response.json()

    stored = buyer.http.get(receipt["receipt_url"].replace("http://localhost:7071", buyer.host), timeout=10)

    assert stored.status_code == 200
    assert stored.content == response.content


@pytest.mark.parametrize("receipt_id", ["rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa", "not-a-receipt", "..%2f..%2fetc"])
def test_unknown_receipt_is_404_json(buyer, receipt_id):
    response = buyer.http.get(f"{buyer.host}/api/receipts/{receipt_id}", timeout=10)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_retry_with_same_key_replays_byte_for_byte_and_sends_once(buyer, mail):
    payload = {"email": buyer.email, "idempotency_key": buyer.key}

    first = buyer.purchase(payload)
    second = buyer.purchase(payload)

    assert first.status_code == second.status_code == 200
    assert second.content == first.content
    assert second.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert checks(first.json())["idempotency"] == "pass"
    assert len(mail.emails_to(buyer.email)) == 1
    drain_until_empty(buyer.host)
    contact = mail.contact(buyer.email)
    assert contact is not None and (contact["upserts"], contact["modifications"]) == (1, 0)


def test_idempotency_key_header_replays_too(buyer, mail):
    first = buyer.purchase(headers={"Idempotency-Key": buyer.key})
    second = buyer.purchase(headers={"Idempotency-Key": buyer.key})

    assert second.content == first.content
    assert second.headers["Idempotent-Replayed"] == "true"
    assert len(mail.emails_to(buyer.email)) == 1


def test_tool_argument_key_wins_over_header(buyer, mail):
    first = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})
    other_header = "header-key-" + buyer.key[-12:]

    replay = buyer.purchase(
        {"email": buyer.email, "idempotency_key": buyer.key}, headers={"Idempotency-Key": other_header}
    )
    header_only = buyer.purchase(headers={"Idempotency-Key": other_header})

    assert replay.content == first.content
    assert header_only.json()["receipt_id"] != first.json()["receipt_id"]
    assert "Idempotent-Replayed" not in header_only.headers
    assert len(mail.emails_to(buyer.email)) == 2


def test_key_check_runs_before_input_validation(buyer):
    buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})

    reused = buyer.purchase(
        {"email": buyer.email, "bundle_id": UNKNOWN_BUNDLE_ID, "idempotency_key": buyer.key}
    )

    assert reused.status_code == 422
    assert reused.json()["error"]["code"] == "idempotency_key_reused"


@pytest.mark.parametrize("key", ["short", "has space in it", "x" * 129, "emoji-🙂-key", 12345678, ""])
def test_invalid_key_is_refused_and_nothing_runs(buyer, mail, key):
    response = buyer.purchase({"email": buyer.email, "idempotency_key": key})

    assert response.status_code == 400
    receipt = response.json()
    assert receipt["status"] == "refused"
    assert receipt["error"]["code"] == "invalid_idempotency_key"
    assert checks(receipt)["idempotency"] == "fail"
    assert checks(receipt)["rate_limit"] == "skipped"
    assert mail.emails_to(buyer.email) == []


def test_invalid_key_header_is_refused(buyer, mail):
    response = buyer.purchase(headers={"Idempotency-Key": "bad key!"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_idempotency_key"
    assert mail.emails_to(buyer.email) == []


def test_brevo_failure_is_not_cached_and_retry_succeeds(buyer, mail):
    mail.fail_next("/v3/smtp/email", 500, match=buyer.email)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}

    failed = buyer.purchase(payload)
    retried = buyer.purchase(payload)

    assert failed.status_code == 503
    assert failed.headers["Retry-After"] == "2"
    assert failed.json()["status"] == "failed"
    assert checks(failed.json())["fulfillment_email"] == "fail"
    assert failed.json()["receipt_url"] is None
    assert retried.status_code == 200
    assert "Idempotent-Replayed" not in retried.headers
    assert retried.json()["status"] == "fulfilled"
    assert len(mail.emails_to(buyer.email)) == 1
    assert buyer.purchase(payload).content == retried.content


def test_brevo_throttling_tells_the_agent_when_brevo_takes_calls_again(buyer, mail):
    mail.fail_next("/v3/smtp/email", 429, match=buyer.email, headers={"x-sib-ratelimit-reset": "7"})

    throttled = buyer.purchase()
    via_mcp_args = {"email": buyer.email}
    mail.fail_next("/v3/smtp/email", 429, match=buyer.email, headers={"x-sib-ratelimit-reset": "7"})
    throttled_mcp = buyer.call_tool(via_mcp_args).json()["result"]

    assert throttled.status_code == 503
    assert throttled.headers["Retry-After"] == "7"
    assert throttled.json()["error"]["retry_after_seconds"] == 7
    assert throttled_mcp["isError"] is True
    assert throttled_mcp["structuredContent"]["error"]["retry_after_seconds"] == 7
    assert mail.emails_to(buyer.email) == []


def _dead(azurite: str, service: str) -> str:
    """The session's Azurite connection string with `service` ("Table", "Queue") on a dead port."""
    dead_port = azurite.split(f"{service}Endpoint=http://127.0.0.1:")[1].split("/")[0]
    return azurite.replace(f"127.0.0.1:{dead_port}", "127.0.0.1:9")


def test_brevo_rejecting_the_email_is_502_and_nothing_is_sent(buyer, mail):
    mail.fail_next("/v3/smtp/email", 400, match=buyer.email)

    response = buyer.purchase()

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_rejected"
    assert checks(response.json())["contact_upsert"] == "pass"
    assert checks(response.json())["fulfillment_email"] == "fail"
    assert mail.emails_to(buyer.email) == []


def test_a_contact_queue_that_cannot_take_the_buyer_is_503_and_stops_the_email(host_factory, azurite, mail):
    host = host_factory(AzureWebJobsStorage=_dead(azurite, "Queue"), STOREFRONT_STORAGE_TIMEOUT_SECONDS="1")
    buyer = Buyer(host.url)

    response = buyer.purchase()

    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "store_unavailable"
    assert checks(response.json())["contact_upsert"] == "fail"
    assert checks(response.json())["fulfillment_email"] == "skipped"
    assert mail.emails_to(buyer.email) == []


def test_brevo_timeout_is_503_with_a_failure_receipt(host_factory, mail):
    host = host_factory(STOREFRONT_BREVO_TIMEOUT_SECONDS="0.5")
    buyer = Buyer(host.url)
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=2)

    response = buyer.purchase()

    assert response.status_code == 503
    assert response.headers["Retry-After"] == "2"
    assert response.json()["error"]["code"] == "upstream_unavailable"
    assert "in time" in response.json()["error"]["message"]


@pytest.fixture(scope="module")
def five_an_hour(host_factory):
    """A host with the production rate limit, 5 purchases per address per hour (the development
    settings allow more), and room for them all to go to one recipient."""
    return host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="5", STOREFRONT_RECIPIENT_LIMIT_PER_DAY="50")


def test_sixth_purchase_from_one_address_in_an_hour_is_refused_replays_are_free(five_an_hour):
    buyer = Buyer(five_an_hour.url)
    keyed = {"email": buyer.email, "idempotency_key": buyer.key}
    first = buyer.purchase(keyed)
    for _ in range(4):
        assert buyer.purchase().status_code == 200
    replays = [buyer.purchase(keyed) for _ in range(3)]

    sixth = buyer.purchase()

    assert all(r.status_code == 200 and r.content == first.content for r in replays)
    assert sixth.status_code == 429
    assert int(sixth.headers["Retry-After"]) > 0
    assert sixth.json()["error"]["code"] == "rate_limited"
    assert checks(sixth.json())["rate_limit"] == "fail"
    assert Buyer(buyer.host).purchase().status_code == 200


def test_rate_limit_uses_the_address_azure_saw_not_a_forged_header(five_an_hour):
    buyer = Buyer(five_an_hour.url)
    for n in range(5):
        assert buyer.purchase(headers={"X-Forwarded-For": f"10.0.0.{n}"}).status_code == 200
    assert buyer.purchase(headers={"X-Forwarded-For": "10.9.9.9"}).status_code == 429


def test_the_development_settings_allow_60_purchases_an_hour_and_production_5(buyer):
    answers = [buyer.purchase({"email": unique_email()}) for _ in range(6)]  # one client, six recipients

    assert [a.status_code for a in answers] == [200] * 6
    assert all(checks(a.json())["rate_limit"] == "pass" for a in answers)
    assert dev_settings()["STOREFRONT_RATE_LIMIT_PER_HOUR"] == "60"
    assert Settings.from_env({}).rate_limit_per_hour == 5


def test_cost_ceiling_refuses_once_reached(host_factory):
    host = host_factory(
        STOREFRONT_DAILY_COST_CEILING_USD="0.03",
        STOREFRONT_COST_PER_PURCHASE_USD="0.01",
        STOREFRONT_GOVERNANCE_TABLE="governanceceiling",
    )
    answers = [Buyer(host.url).purchase() for _ in range(4)]

    assert [a.status_code for a in answers] == [200, 200, 200, 429]
    refused = answers[-1].json()
    assert refused["error"]["code"] == "cost_ceiling_reached"
    assert "STOREFRONT_DAILY_COST_CEILING_USD" in refused["error"]["message"]
    assert checks(refused)["cost_ceiling"] == "fail"
    assert checks(answers[0].json())["cost_ceiling"] == "pass"


def _tableless(host_factory, azurite, **env):
    broken = _dead(azurite, "Table")
    return host_factory(AzureWebJobsStorage=broken, STOREFRONT_STORAGE_TIMEOUT_SECONDS="1", **env)


def test_with_the_table_down_a_keyed_purchase_is_refused_and_sends_nothing(host_factory, azurite, mail, host):
    tableless = _tableless(host_factory, azurite)
    buyer = Buyer(tableless.url)

    response = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})

    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"] == "5"
    assert response.json()["error"]["code"] == "store_unavailable"
    assert checks(response.json())["idempotency"] == "fail"
    assert checks(response.json())["fulfillment_email"] == "skipped"
    assert mail.emails_to(buyer.email) == []
    drain_until_empty(host.url)  # a healthy host drains the same queue: its table holds the lease
    assert mail.contact(buyer.email) is None


def test_fail_open_setting_runs_a_key_unprotected_and_says_so(host_factory, azurite, mail):
    host = _tableless(host_factory, azurite, STOREFRONT_IDEMPOTENCY_FAIL_OPEN="true")
    buyer = Buyer(host.url)

    response = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})

    assert response.status_code == 200, response.text
    assert checks(response.json())["idempotency"] == "degraded"
    assert len(mail.emails_to(buyer.email)) == 1


def test_with_the_table_down_an_unkeyed_purchase_is_degraded_and_its_ledger_row_follows(
    host_factory, azurite, mail
):
    suffix = uuid.uuid4().hex[:8]
    names = {
        "STOREFRONT_LEDGER_TABLE": f"ledgerdown{suffix}",
        "STOREFRONT_RECEIPTS_CONTAINER": f"rcpt-{suffix}",
    }
    host = _tableless(host_factory, azurite, **names)
    healthy = host_factory(**names)
    buyer = Buyer(host.url)

    response = buyer.purchase({"email": buyer.email})
    receipt = response.json()
    day = receipt["issued_at"][:10]
    before = buyer.http.get(f"{healthy.url}/api/receipts", params={"date": day}, timeout=10).json()
    repaired = buyer.http.post(f"{healthy.url}/admin/functions/repair_receipts", json={}, timeout=30)
    after = buyer.http.get(f"{healthy.url}/api/receipts", params={"date": day}, timeout=10).json()

    assert response.status_code == 200, response.text
    assert receipt["status"] == "fulfilled"
    assert checks(receipt)["idempotency"] == "skipped"
    assert checks(receipt)["rate_limit"] == "degraded"
    assert checks(receipt)["cost_ceiling"] == "degraded"
    assert len(mail.emails_to(buyer.email)) == 1
    assert buyer.http.get(f"{host.url}/api/receipts/{receipt['receipt_id']}", timeout=10).content == (
        response.content
    )
    assert before["count"] == 0
    assert repaired.status_code == 202
    assert [r["receipt_id"] for r in after["receipts"]] == [receipt["receipt_id"]]
    assert (
        after["count"] == 1 and after["totals"]["USD"]["cost_estimate"] == receipt["billing"]["cost_estimate"]
    )


def test_missing_secrets_refuse_to_mint_with_a_clear_error(host_factory, mail):
    host = host_factory(STOREFRONT_SIGNING_KEY=" ")
    buyer = Buyer(host.url)

    response = buyer.purchase()
    health = buyer.http.get(f"{host.url}/api/health", timeout=10).json()

    assert response.status_code == 503
    assert response.json()["error"]["code"] == "not_configured"
    assert "STOREFRONT_SIGNING_KEY" in response.json()["error"]["message"]
    assert health["missing_settings"] == ["STOREFRONT_SIGNING_KEY"]
    assert mail.emails_to(buyer.email) == []


def test_health_reports_ok(buyer):
    response = buyer.http.get(f"{buyer.host}/api/health", timeout=10)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
