"""Exactly one email and one receipt per idempotency key, whatever the timing, the number of
instances or a crash: real dev host processes sharing one Azurite, the Brevo sandbox counting."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import TableClient
from azure.storage.blob import ContainerClient

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from devstack.services import dev_settings
from shared.config.hashing import Hasher
from shared.purchase.call import scoped_key_hash
from tests.support import Buyer, drain_until_empty

LEASE = 5  # seconds: the crash test's lease, long enough that a loaded machine still checks inside it


def names(tag: str) -> dict[str, str]:
    """Settings giving a group of hosts their own idempotency table and receipts container."""
    suffix = uuid.uuid4().hex[:10]
    return {
        "STOREFRONT_IDEMPOTENCY_TABLE": f"idem{tag}{suffix}",
        "STOREFRONT_RECEIPTS_CONTAINER": f"rcpt-{tag}-{suffix}",
        "STOREFRONT_LEDGER_TABLE": f"ledger{tag}{suffix}",
    }


def receipt_blobs(azurite: str, env: dict[str, str]) -> list[str]:
    container = ContainerClient.from_connection_string(azurite, env["STOREFRONT_RECEIPTS_CONTAINER"])
    if not container.exists():
        return []
    return [blob.name for blob in container.list_blobs()]


def claim_entity(azurite: str, env: dict[str, str], key: str, email: str) -> dict | None:
    key_hash = scoped_key_hash(Hasher(dev_settings()["STOREFRONT_HASH_SECRET"]), key, email)
    table = TableClient.from_connection_string(azurite, env["STOREFRONT_IDEMPOTENCY_TABLE"])
    try:
        found = list(table.query_entities("PartitionKey eq @pk", parameters={"pk": key_hash}))
    except ResourceNotFoundError:
        return None
    return dict(found[0]) if found else None


def made_once(contact: dict | None) -> bool:
    """A Brevo contact written once, at its creation, and never since."""
    return contact is not None and (contact["upserts"], contact["modifications"]) == (1, 0)


def check(receipt: dict, name: str) -> dict:
    return next(c for c in receipt["checks"] if c["name"] == name)


def storm(hosts, email: str, key: str, *, header_for_half: bool) -> list[requests.Response]:
    """50 requests with one key, spread over the hosts, released at the same instant."""
    start = threading.Barrier(50)

    def one(n: int) -> requests.Response:
        buyer = Buyer(hosts[n % len(hosts)].url, email=email, key=key)
        if header_for_half and n % 2:
            payload, headers = {"email": email}, {"Idempotency-Key": key}
        else:
            payload, headers = {"email": email, "idempotency_key": key}, None
        start.wait()
        return buyer.purchase(payload, headers=headers)

    with ThreadPoolExecutor(50) as pool:
        return list(pool.map(one, range(50)))


@pytest.mark.parametrize("header_for_half", [False, True], ids=["argument", "header-and-argument"])
def test_fifty_concurrent_retries_over_two_hosts_send_one_email_and_store_one_receipt(
    host_factory, azurite, mail, header_for_half
):
    env = names("storm")
    hosts = [host_factory(**env), host_factory(**env)]
    email, key = f"storm.{uuid.uuid4().hex[:12]}@example.org", f"storm-{uuid.uuid4().hex}"
    mail.fail_next("/v3/smtp/email", 0, match=email, delay=0.5)

    answers = storm(hosts, email, key, header_for_half=header_for_half)

    statuses = [a.status_code for a in answers]
    assert set(statuses) <= {200, 409}, statuses
    bodies = {a.content for a in answers if a.status_code == 200}
    assert len(bodies) == 1, "every 200 carries the same receipt bytes"
    assert statuses.count(409) > 0, "the storm overlapped the first purchase"
    for refused in (a for a in answers if a.status_code == 409):
        assert int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["code"] == "idempotency_key_in_use"
    assert len(mail.emails_to(email)) == 1
    drain_until_empty(hosts[0].url)
    assert made_once(mail.contact(email))
    assert receipt_blobs(azurite, env) == [f"{answers[statuses.index(200)].json()['receipt_id']}.json"]
    late = Buyer(hosts[1].url, email=email, key=key).purchase({"email": email, "idempotency_key": key})
    assert late.status_code == 200 and late.content in bodies


def test_host_killed_after_brevo_accepted_the_email_is_finished_by_a_retry_without_a_second_email(
    host_factory, azurite, mail
):
    env = {**names("crash"), "STOREFRONT_IDEMPOTENCY_LEASE_SECONDS": str(LEASE)}
    doomed, survivor = host_factory(**env), host_factory(**env)
    buyer = Buyer(doomed.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=1.5)
    in_flight = threading.Thread(target=lambda: _swallow(lambda: buyer.purchase(payload)), daemon=True)
    in_flight.start()
    _wait_until(lambda: not _fault_pending(mail, buyer.email))  # Brevo is holding the send

    doomed.proc.kill()
    _wait_until(lambda: len(mail.emails_to(buyer.email)) == 1, timeout=10)
    retry = Buyer(survivor.url, email=buyer.email, key=buyer.key)
    during_lease = retry.purchase(payload)
    lease_ends = claim_entity(azurite, env, buyer.key, buyer.email)["LockedUntil"]  # renewed before the send
    time.sleep(max(0.0, lease_ends + 0.5 - time.time()))
    finished = retry.purchase(payload)

    assert during_lease.status_code == 409
    assert finished.status_code == 200, finished.text
    receipt = finished.json()
    assert receipt["status"] == "fulfilled"
    assert check(receipt, "idempotency")["detail"].startswith("key claimed after an interrupted attempt")
    assert len(mail.emails_to(buyer.email)) == 1
    assert check(receipt, "fulfillment_email") == {  # resent inside Brevo's idempotency window
        "name": "fulfillment_email",
        "result": "pass",
        "detail": "already accepted by Brevo before a restart",
    }
    email_link = mail.emails_to(buyer.email)[0]["links"][0]
    assert receipt["download"]["token_id"] == _token_claims(email_link)["jti"]
    drain_until_empty(survivor.url)
    assert made_once(mail.contact(buyer.email))
    replays = [retry.purchase(payload) for _ in range(3)]
    assert all(r.status_code == 200 and r.content == finished.content for r in replays)
    assert all(r.headers["Idempotent-Replayed"] == "true" for r in replays)
    assert receipt_blobs(azurite, env) == [f"{receipt['receipt_id']}.json"]


def test_a_key_belongs_to_its_buyer_so_a_stranger_can_neither_squat_nor_probe_it(buyer, mail):
    stranger = f"stranger.{uuid.uuid4().hex[:12]}@example.org"
    squatted = buyer.purchase({"email": stranger, "idempotency_key": buyer.key})

    own = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})
    probe = buyer.purchase({"email": stranger, "bundle_id": "mcp-field-guide", "idempotency_key": buyer.key})
    replay = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})

    assert squatted.status_code == own.status_code == 200, own.text
    assert "Idempotent-Replayed" not in own.headers
    assert own.json()["receipt_id"] != squatted.json()["receipt_id"]
    assert len(mail.emails_to(buyer.email)) == 1 and len(mail.emails_to(stranger)) == 1
    assert probe.status_code == 422 and probe.json()["error"]["code"] == "idempotency_key_reused"
    assert own.json()["receipt_id"] not in probe.text and own.json()["buyer"]["id"] not in probe.text
    assert replay.content == own.content and replay.headers["Idempotent-Replayed"] == "true"
    via_mcp = buyer.call_tool(
        {"email": stranger, "bundle_id": "mcp-field-guide", "idempotency_key": buyer.key}
    )
    result = via_mcp.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "idempotency_key_reused"
    assert own.json()["receipt_id"] not in str(result)


def test_same_key_same_purchase_in_other_words_still_replays(buyer, mail):
    first = buyer.purchase({"email": buyer.email, "idempotency_key": buyer.key})

    again = buyer.purchase(
        {"email": "  " + buyer.email.upper(), "bundle_id": "agent-starter-kit", "idempotency_key": buyer.key}
    )

    assert again.status_code == 200
    assert again.content == first.content
    assert len(mail.emails_to(buyer.email)) == 1


def test_mcp_call_while_the_first_is_running_gets_is_error_409_meaning(buyer, azurite, mail):
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=2.0)
    args = {"email": buyer.email, "idempotency_key": buyer.key}
    first = threading.Thread(target=lambda: buyer.purchase(args), daemon=True)
    first.start()
    _wait_until(
        lambda: claim_entity(azurite, {"STOREFRONT_IDEMPOTENCY_TABLE": "idempotency"}, buyer.key, buyer.email)
    )

    result = buyer.call_tool(args).json()["result"]
    first.join(10)

    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == "idempotency_key_in_use"
    assert result["structuredContent"]["error"]["retry_after_seconds"] >= 1
    assert len(mail.emails_to(buyer.email)) == 1


def test_expired_mapping_is_reaped_and_the_key_then_runs_as_new(host_factory, azurite, mail):
    env = {**names("ttl"), "STOREFRONT_IDEMPOTENCY_TTL_SECONDS": "2"}
    host = host_factory(**env)
    buyer = Buyer(host.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}
    first = buyer.purchase(payload)
    assert buyer.purchase(payload).content == first.content
    assert claim_entity(azurite, env, buyer.key, buyer.email)["State"] == "completed"
    time.sleep(2.2)

    reaped = requests.post(
        f"{host.url}/admin/functions/reap_idempotency_keys", json={"input": ""}, timeout=30
    )
    gone = claim_entity(azurite, env, buyer.key, buyer.email)
    again = buyer.purchase(payload)

    assert reaped.status_code == 202
    assert gone is None
    assert again.status_code == 200
    assert "Idempotent-Replayed" not in again.headers
    assert again.json()["receipt_id"] != first.json()["receipt_id"]
    assert len(mail.emails_to(buyer.email)) == 2


def test_expiry_is_checked_on_read_before_the_reaper_runs(host_factory, mail):
    host = host_factory(**names("ttlread"), STOREFRONT_IDEMPOTENCY_TTL_SECONDS="1")
    buyer = Buyer(host.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}
    first = buyer.purchase(payload)
    time.sleep(1.2)

    again = buyer.purchase(payload)

    assert again.status_code == 200
    assert "Idempotent-Replayed" not in again.headers
    assert again.json()["receipt_id"] != first.json()["receipt_id"]
    assert len(mail.emails_to(buyer.email)) == 2


def test_without_a_key_two_identical_requests_are_two_purchases(buyer, mail):
    first = buyer.purchase({"email": buyer.email})
    second = buyer.purchase({"email": buyer.email})

    assert first.status_code == second.status_code == 200
    assert first.json()["receipt_id"] != second.json()["receipt_id"]
    assert check(first.json(), "idempotency")["result"] == "skipped"
    assert len(mail.emails_to(buyer.email)) == 2


def test_a_failed_attempt_releases_the_key_so_the_retry_runs_at_once(host_factory, azurite, mail):
    queue = FaultProxy(endpoint_port(azurite, "Queue")).start()
    try:
        host = host_factory(AzureWebJobsStorage=proxied(azurite, queue=queue))
        buyer = Buyer(host.url)
        payload = {"email": buyer.email, "idempotency_key": buyer.key}
        queue.set("cut")  # the buyer cannot be queued to become a contact: the attempt fails before the email

        failed = buyer.purchase(payload)
        queue.set("pass")
        retried = buyer.purchase(payload)
    finally:
        queue.stop()

    assert failed.status_code == 503
    assert check(failed.json(), "contact_upsert")["result"] == "fail"
    assert retried.status_code == 200
    assert (
        check(retried.json(), "idempotency")["detail"] == "key claimed; a retry with it replays this receipt"
    )
    assert len(mail.emails_to(buyer.email)) == 1


def test_an_email_timeout_keeps_the_token_so_the_retry_does_not_send_twice(host_factory, mail):
    host = host_factory(STOREFRONT_BREVO_TIMEOUT_SECONDS="0.5")
    buyer = Buyer(host.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=1.0)

    timed_out = buyer.purchase(payload)
    _wait_until(lambda: len(mail.emails_to(buyer.email)) == 1)
    retried = buyer.purchase(payload)

    assert timed_out.status_code == 503
    assert retried.status_code == 200, retried.text
    assert check(retried.json(), "fulfillment_email")["detail"] == (
        "already accepted by Brevo before a restart"  # resent with the claim's key: Brevo knew it
    )
    link = mail.emails_to(buyer.email)[0]["links"][0]
    assert _token_claims(link)["jti"] == retried.json()["download"]["token_id"]
    assert len(mail.emails_to(buyer.email)) == 1


def _token_claims(link: str) -> dict:
    from jose import jwt

    return jwt.get_unverified_claims(link.rsplit("/", 1)[1])


def _fault_pending(mail, address: str) -> bool:
    faults = requests.get(f"{mail.url}/_sandbox/faults", timeout=10).json()
    return any(fault["match"] == address for fault in faults)


def _swallow(call) -> None:
    with contextlib.suppress(requests.RequestException):
        call()


def _wait_until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def test_a_retry_after_an_email_timeout_does_not_pass_the_cost_ceiling(host_factory, mail):
    host = host_factory(
        STOREFRONT_BREVO_TIMEOUT_SECONDS="0.5",
        STOREFRONT_DAILY_COST_CEILING_USD="0.01",
        STOREFRONT_COST_PER_PURCHASE_USD="0.01",
        STOREFRONT_GOVERNANCE_TABLE=f"govceiling{uuid.uuid4().hex[:8]}",
    )
    buyer = Buyer(host.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}
    mail.fail_next("/v3/smtp/email", 0, match=buyer.email, delay=1.0)

    timed_out = buyer.purchase(payload)
    assert check(timed_out.json(), "fulfillment_email")["result"] == "fail", timed_out.text  # it timed out
    _wait_until(lambda: len(mail.emails_to(buyer.email)) == 1, timeout=15)  # Brevo finishes it meanwhile
    finished = buyer.purchase(payload)
    other = Buyer(host.url).purchase()

    assert timed_out.status_code == 503
    assert finished.status_code == 200
    assert other.status_code == 429
    assert other.json()["error"]["code"] == "cost_ceiling_reached"


def test_a_receipt_answered_while_blob_is_down_is_put_on_record_by_the_repair_timer(
    host_factory, azurite, mail
):
    env = names("blobdown")
    blob_port = azurite.split("BlobEndpoint=http://127.0.0.1:")[1].split("/")[0]
    broken = azurite.replace(f"127.0.0.1:{blob_port}", "127.0.0.1:9")
    blobless = host_factory(**env, AzureWebJobsStorage=broken, STOREFRONT_STORAGE_TIMEOUT_SECONDS="1")
    healthy = host_factory(**env)
    buyer = Buyer(blobless.url)
    payload = {"email": buyer.email, "idempotency_key": buyer.key}

    first = buyer.purchase(payload)
    receipt_id = first.json()["receipt_id"]
    retry = Buyer(healthy.url, email=buyer.email, key=buyer.key).purchase(payload)
    before_repair = receipt_blobs(azurite, env)
    at_url_before = requests.get(f"{healthy.url}/api/receipts/{receipt_id}", timeout=10)
    repaired = requests.post(f"{healthy.url}/admin/functions/repair_receipts", json={}, timeout=30)
    at_url = requests.get(f"{healthy.url}/api/receipts/{receipt_id}", timeout=10)

    assert first.status_code == 200, first.text
    assert retry.status_code == 200 and retry.content == first.content
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert before_repair == []
    assert at_url_before.status_code == 200 and at_url_before.content == first.content
    assert repaired.status_code == 202
    assert at_url.status_code == 200 and at_url.content == first.content
    assert listed(healthy, first.json()) == [receipt_id]
    assert len(mail.emails_to(buyer.email)) == 1


def listed(host, receipt: dict) -> list[str]:
    """The receipt ids the finance listing shows for the receipt's day."""
    day = receipt["issued_at"][:10]
    listing = requests.get(f"{host.url}/api/receipts", params={"date": day, "page_size": 200}, timeout=10)
    return [entry["receipt_id"] for entry in listing.json()["receipts"]]
