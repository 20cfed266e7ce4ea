"""shared.purchase.storefront: the flow itself, in process, on Azurite and the Brevo sandbox, with a claim
store that can be made to fail at a chosen moment."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from decimal import Decimal

import pytest
import requests
from jose import jwt

from devstack.counting import RoundTrips
from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.exactly_once.idempotency import COMPLETED, IdempotencyHandler
from shared.purchase.call import Caller, PurchaseCall, StoreConfig, scoped_key_hash
from shared.purchase.governance import Governance, Limits
from shared.purchase.receipt.document import sha256
from shared.purchase.schema import canonical_request
from shared.purchase.storefront import Storefront
from shared.seams.brevo import IDEMPOTENCY_WINDOW_SECONDS, BrevoClient
from shared.seams.claims import Claim, TableClaimStore
from shared.seams.counters import TableCounters
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import container_client, table_client
from tests.support import new_ec_key, own_queue, private_pem, unique_email, unique_key

KEYS = KeySet.load(private_pem(new_ec_key()))
# Brevo's answer is held for twice this to play a lost answer; a loaded machine (make mutate runs
# two workers) still answers a normal call well within it.
BREVO_TIMEOUT = 1.0


class Clock:
    def __init__(self, now: float = 1_900_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


class FlakyStore(TableClaimStore):
    """The real Table store, whose next `fail_updates` updates raise StorageOutage."""

    fail_updates = 0

    def update(self, claim):
        if self.fail_updates:
            self.fail_updates -= 1
            raise StorageOutage("injected outage")
        return super().update(claim)


def build_shop(
    azurite, sandbox, trips: RoundTrips | None = None, template_dir: str = "", limits: Limits | None = None
):
    """The storefront on its own tables and container; with `trips`, every storage call is
    counted at the transport; with `template_dir`, an operator's email templates."""
    suffix = uuid.uuid4().hex[:10]
    clock = Clock()
    hasher = Hasher("unit-test-secret")

    def table(name):
        return table_client(azurite, f"{name}{suffix}", 5, trips.transport("table") if trips else None)

    receipts = BlobReceiptStore(
        container_client(azurite, f"rcpt{suffix}", 5, trips.transport("blob") if trips else None)
    )
    store = FlakyStore(table("idem"))
    storefront = Storefront(
        StoreConfig(
            "http://localhost:7071", "store@example.com", "Storefront", email_template_dir=template_dir
        ),
        hasher=hasher,
        idempotency=IdempotencyHandler(store, receipts, lease_seconds=60, ttl_seconds=3600, clock=clock),
        governance=Governance(
            TableCounters(table("gov")), hasher, limits or Limits(100, Decimal("5"), Decimal("0.01"))
        ),
        receipts=receipts,
        brevo=BrevoClient(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", BREVO_TIMEOUT),
        keys=lambda: KEYS,
        ledger=TableLedger(table("ledger")),
        repairs=RepairQueue(table("ledger")),
        contacts=own_queue(azurite, transport=trips.transport("queue") if trips else None),
        clock=clock,
    )
    return storefront, store, clock


@pytest.fixture
def shop(azurite, sandbox):
    return build_shop(azurite, sandbox)


def buy(storefront: Storefront, email: str, key: str):
    call = PurchaseCall({"email": email, "idempotency_key": key}, None, "203.0.113.5", Caller("http"))
    return storefront.purchase(call)


def emailed_token_ids(mail_url: str, email: str) -> list[str]:
    emails = requests.get(f"{mail_url}/_sandbox/emails", params={"to": email}, timeout=10).json()
    links = [link for e in emails for link in e["links"] if "/api/download/" in link]
    return sorted({jwt.get_unverified_claims(link.rsplit("/", 1)[1])["jti"] for link in links})


def test_a_taker_that_never_saw_a_recovery_point_still_names_the_emailed_token(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("flaky"), unique_key()
    store.fail_updates = 1  # the claim store goes away right after the token is minted...
    fault = {"path": "/v3/smtp/email", "status": 0, "match": email, "delay_seconds": BREVO_TIMEOUT * 2}
    requests.post(f"{sandbox.url}/_sandbox/faults", json=fault, timeout=10).raise_for_status()

    first = buy(storefront, email, key)  # ...and Brevo answers too late, yet accepts the email
    deadline = time.monotonic() + BREVO_TIMEOUT * 4
    while not emailed_token_ids(sandbox.url, email) and time.monotonic() < deadline:
        time.sleep(0.05)
    clock.now += 61  # the claim, still processing and with no recovery point, can be taken over
    taken_over = buy(storefront, email, key)

    receipt = json.loads(taken_over.body)
    assert first.status == 503
    assert taken_over.status == 200
    assert emailed_token_ids(sandbox.url, email) == [receipt["download"]["token_id"]]
    [link] = [link for e in emails_to(sandbox, email) for link in e["links"] if "/api/download/" in link]
    expires = jwt.get_unverified_claims(link.rsplit("/", 1)[1])["exp"]
    assert receipt["download"]["expires_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
    # Inside Brevo's idempotency window the taker resends with the claim's key, which Brevo
    # recognises: no call of the transactional log's budget (2 a second, the account's) is spent.
    assert receipt["checks"][-1]["detail"] == "already accepted by Brevo before a restart"


# --- a taker and Brevo's memory -------------------------------------------------------------------
# Brevo remembers an idempotency key for about 30 minutes. A holder that dies between Brevo accepting
# its email and recording it leaves a claim that a retry may take over much later; the taker looks
# for the claim's tag in Brevo's transactional log before it sends.


def fault(sandbox, path: str, status: int, match: str, delay: float = 0, times: int = 1) -> None:
    body = {"path": path, "status": status, "match": match, "delay_seconds": delay, "times": times}
    requests.post(f"{sandbox.url}/_sandbox/faults", json=body, timeout=10).raise_for_status()


def emails_to(sandbox, email: str) -> list[dict]:
    return requests.get(f"{sandbox.url}/_sandbox/emails", params={"to": email}, timeout=10).json()


def died_after_brevo_accepted(storefront, store, sandbox, email: str, key: str) -> None:
    """The first attempt's email is accepted, but its answer never arrives (the run ends as if
    the host had died there): the claim keeps its recovery points and waits for a taker."""
    fault(sandbox, "/v3/smtp/email", 0, email, delay=BREVO_TIMEOUT * 2)
    assert buy(storefront, email, key).status == 503
    deadline = time.monotonic() + BREVO_TIMEOUT * 4
    while not emails_to(sandbox, email) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(emails_to(sandbox, email)) == 1


def test_a_taker_long_after_brevo_forgot_the_key_finds_the_email_in_the_log_and_sends_none(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("forgot"), unique_key()
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    requests.delete(f"{sandbox.url}/_sandbox/idempotency-keys", timeout=10).raise_for_status()
    clock.now += 45 * 60  # Brevo would take the same key as a new email; the claim lives on (TTL 1 h)

    taken_over = buy(storefront, email, key)

    receipt = json.loads(taken_over.body)
    assert taken_over.status == 200, receipt
    assert len(emails_to(sandbox, email)) == 1
    message_id = emails_to(sandbox, email)[0]["messageId"]
    assert receipt["checks"][-1] == {
        "name": "fulfillment_email",
        "result": "pass",
        "detail": f"already accepted by Brevo as {message_id} before a restart (found in its log)",
    }
    assert emailed_token_ids(sandbox.url, email) == [receipt["download"]["token_id"]]
    assert buy(storefront, email, key).body == taken_over.body


def test_the_email_carries_the_claims_tag_and_no_key_or_address_in_it(shop, sandbox):
    storefront, _, _ = shop
    email, key = unique_email("tagged"), unique_key()

    assert buy(storefront, email, key).status == 200

    tags = emails_to(sandbox, email)[0]["tags"]
    assert tags[:2] == ["storefront", "agent-starter-kit"]
    assert len(tags) == 3 and tags[2].startswith("purchase-")
    assert str(uuid.UUID(tags[2].removeprefix("purchase-"))) == tags[2].removeprefix("purchase-")
    assert key not in tags[2] and email not in tags[2]


def test_the_operators_email_templates_are_what_the_buyer_gets(azurite, sandbox, tmp_path):
    (tmp_path / "fulfillment_subject.txt").write_text("{{ bundle.title }} is yours")
    (tmp_path / "fulfillment.txt").write_text("Hello {{ name }}: {{ link }} until {{ expires_at }}")
    storefront, _, _ = build_shop(azurite, sandbox, template_dir=str(tmp_path))
    email, key = unique_email("ownmail"), unique_key()

    assert buy(storefront, email, key).status == 200

    [sent] = emails_to(sandbox, email)
    [link] = [link for link in sent["links"] if "/api/download/" in link]
    assert sent["subject"] == "Agent Starter Kit is yours"
    assert sent["textContent"].startswith(f"Hello : {link} until 20")
    assert link in sent["htmlContent"]  # the built-in HTML, the operator having none of their own


def test_a_taker_whose_predecessor_never_got_an_email_out_sends_it_once(shop, sandbox):
    storefront, _, clock = shop
    email, key = unique_email("neversent"), unique_key()
    fault(sandbox, "/v3/smtp/email", 503, email)  # Brevo refuses: nothing went out

    first = buy(storefront, email, key)
    requests.delete(f"{sandbox.url}/_sandbox/idempotency-keys", timeout=10).raise_for_status()
    clock.now += 45 * 60
    retried = buy(storefront, email, key)

    assert first.status == 503
    assert retried.status == 200
    assert len(emails_to(sandbox, email)) == 1
    assert json.loads(retried.body)["checks"][-1]["detail"].startswith("accepted by Brevo as <")


def test_past_brevos_window_an_unreadable_log_stops_the_taker_instead_of_risking_a_second_email(
    shop, sandbox
):
    storefront, store, clock = shop
    email, key = unique_email("nolog"), unique_key()
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    requests.delete(f"{sandbox.url}/_sandbox/idempotency-keys", timeout=10).raise_for_status()
    clock.now += 45 * 60
    fault(sandbox, "/v3/smtp/emails", 500, email)

    stopped = buy(storefront, email, key)
    finished = buy(storefront, email, key)  # the log answers again

    refusal = json.loads(stopped.body)
    assert stopped.status == 503
    assert stopped.retry_after == 30 and refusal["error"]["retry_after_seconds"] == 30
    assert refusal["error"]["code"] == "upstream_unavailable"
    assert refusal["error"]["message"] == (
        "Brevo's log could not confirm whether the earlier attempt's email went out; retry later"
    )
    assert finished.status == 200
    assert len(emails_to(sandbox, email)) == 1


def test_inside_brevos_window_a_taker_leaves_the_repeat_to_the_idempotency_key_not_the_log(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("keyed"), unique_key()
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    clock.now += 61  # past the 60 s lease, well inside Brevo's memory of the key
    fault(sandbox, "/v3/smtp/emails", 500, email)  # the log would fail, were it asked

    taken_over = buy(storefront, email, key)

    assert taken_over.status == 200
    assert len(emails_to(sandbox, email)) == 1
    assert json.loads(taken_over.body)["checks"][-1]["detail"] == "already accepted by Brevo before a restart"
    # The log's budget (2 calls a second, the account's) went untouched: its fault is still armed.
    unasked = requests.get(
        f"{sandbox.url}/v3/smtp/emails", params={"email": email}, headers={"api-key": "k"}, timeout=10
    )
    assert unasked.status_code == 500


def test_two_purchases_without_a_key_get_different_token_ids(shop, sandbox):
    storefront, _, _ = shop
    email = unique_email("nokey")
    call = PurchaseCall({"email": email}, None, "203.0.113.6", Caller("http"))

    first, second = storefront.purchase(call), storefront.purchase(call)

    assert json.loads(first.body)["download"]["token_id"] != json.loads(second.body)["download"]["token_id"]
    assert len(emailed_token_ids(sandbox.url, email)) == 2


def test_past_brevos_window_a_lasting_log_refusal_is_a_502_not_a_retry_later(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("refusedlog"), unique_key()
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    clock.now += 45 * 60
    fault(sandbox, "/v3/smtp/emails", 400, email)

    refused = buy(storefront, email, key)

    refusal = json.loads(refused.body)
    assert refused.status == 502
    assert refusal["error"]["code"] == "upstream_rejected"
    assert refused.retry_after is None
    assert len(emails_to(sandbox, email)) == 1


# --- what a request costs, counted at the transport ------------------------------------------------


def test_a_replay_is_one_storage_call_and_the_same_bytes(azurite, sandbox):
    trips = RoundTrips()
    storefront, _, _ = build_shop(azurite, sandbox, trips)
    email, key = unique_email("replay"), unique_key()
    first = buy(storefront, email, key)
    trips.take()

    again = buy(storefront, email, key)

    assert trips.take() == {"table": 1}
    assert (again.status, again.replayed, again.body) == (200, True, first.body)


def test_a_claim_completed_before_receipts_rode_on_it_replays_from_blob_in_two_calls(azurite, sandbox):
    trips = RoundTrips()
    storefront, store, _ = build_shop(azurite, sandbox, trips)
    email, key = unique_email("oldclaim"), unique_key()
    first = buy(storefront, email, key)
    key_hash = scoped_key_hash(Hasher("unit-test-secret"), key, email)
    done = store.get(key_hash)
    store.update(replace(done, progress={k: v for k, v in done.progress.items() if k != "receipt"}))
    trips.take()

    again = buy(storefront, email, key)

    assert trips.take() == {"table": 1, "blob": 1}
    assert (again.status, again.replayed, again.body) == (200, True, first.body)


def test_a_fresh_key_in_a_store_that_started_with_scoped_keys_reads_no_pre_scoping_claim(azurite, sandbox):
    trips = RoundTrips()
    storefront, _, _ = build_shop(azurite, sandbox, trips)
    buy(storefront, unique_email("first"), unique_key())  # the store's first look: no claims yet
    key = unique_key()
    trips.take()

    assert buy(storefront, unique_email("second"), key).status == 200

    unscoped = Hasher("unit-test-secret").idempotency_key(key)
    assert not [sent for sent in trips.sent if unscoped in sent.url]
    assert [sent for sent in trips.sent if sent.method == "GET" and "/idem" in sent.url]  # it did read


def test_a_retry_after_upgrading_replays_the_claim_written_before_keys_were_scoped(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("upgrade"), unique_key()
    arguments = {"email": email, "idempotency_key": key}
    hasher = Hasher("unit-test-secret")
    body = b'{"receipt_id": "rcpt_before_the_upgrade"}'
    store.create(  # as the version before scoping wrote it: under the key's hash alone
        Claim(
            hasher.idempotency_key(key),
            COMPLETED,
            hasher.request(canonical_request(arguments)),
            "rcpt_before_the_upgrade",
            clock.now,
            clock.now + 3600,
            progress={"receipt": body.decode()},
            result_sha256=sha256(body),
        )
    )

    retry = buy(storefront, email, key)

    assert (retry.status, retry.replayed, retry.body) == (200, True, body)
    assert emails_to(sandbox, email) == []


def test_at_the_very_end_of_brevos_window_the_taker_needs_the_log_to_confirm(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("windowend"), unique_key()
    claimed_at = clock.now
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    requests.delete(f"{sandbox.url}/_sandbox/idempotency-keys", timeout=10).raise_for_status()
    clock.now = claimed_at + IDEMPOTENCY_WINDOW_SECONDS  # no longer inside it
    fault(sandbox, "/v3/smtp/emails", 500, email)

    stopped = buy(storefront, email, key)

    assert stopped.status == 503 and stopped.retry_after == 30
    assert len(emails_to(sandbox, email)) == 1


def test_past_brevos_window_a_busy_log_sets_the_retry_when_it_asks_for_longer(shop, sandbox):
    storefront, store, clock = shop
    email, key = unique_email("busylog"), unique_key()
    died_after_brevo_accepted(storefront, store, sandbox, email, key)
    clock.now += 45 * 60
    body = {
        "path": "/v3/smtp/emails",
        "status": 429,
        "match": email,
        "headers": {"x-sib-ratelimit-reset": "120"},
    }
    requests.post(f"{sandbox.url}/_sandbox/faults", json=body, timeout=10).raise_for_status()

    stopped = buy(storefront, email, key)

    assert (stopped.status, stopped.retry_after) == (503, 120)
    assert len(emails_to(sandbox, email)) == 1


# --- Brevo's email limit and the account's quota ---------------------------------------------------


@pytest.fixture
def tight_shop(azurite, sandbox):
    """A store allowing one purchase an hour per client and one email a day per mailbox: a
    refusal that kept its counts would show as a 429 on the retry."""
    yield build_shop(
        azurite, sandbox, limits=Limits(1, Decimal("5"), Decimal("0.01"), recipient_limit_per_day=1)
    )
    requests.put(
        f"{sandbox.url}/_sandbox/account", json={"email_credits": None}, timeout=10
    ).raise_for_status()


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no key"])
def test_brevos_429_on_the_email_is_a_503_with_its_reset_and_the_retry_sends_one_email(
    tight_shop, sandbox, keyed
):
    storefront, _, _ = tight_shop
    email = unique_email("emaillimit")
    key = unique_key() if keyed else None
    limited = {
        "x-sib-ratelimit-limit": "1000",
        "x-sib-ratelimit-remaining": "0",
        "x-sib-ratelimit-reset": "7",
    }
    body = {"path": "/v3/smtp/email", "status": 429, "match": email, "times": 1, "headers": limited}
    requests.post(f"{sandbox.url}/_sandbox/faults", json=body, timeout=10).raise_for_status()
    arguments = {"email": email, **({"idempotency_key": key} if key else {})}

    refused = storefront.purchase(PurchaseCall(arguments, None, "203.0.113.77", Caller("http")))
    retried = storefront.purchase(PurchaseCall(arguments, None, "203.0.113.77", Caller("http")))

    refusal = json.loads(refused.body)
    assert refused.status == 503 and refused.retry_after == 7
    assert refusal["error"]["code"] == "upstream_unavailable"
    assert refusal["error"]["retry_after_seconds"] == 7
    assert retried.status == 200, retried.body  # the rate and recipient limits (1 each) were given back
    assert len(emails_to(sandbox, email)) == 1


def test_a_send_the_accounts_quota_refuses_is_a_clear_503_and_one_operator_line(tight_shop, sandbox, caplog):
    storefront, _, _ = tight_shop
    email, key = unique_email("quota"), unique_key()
    requests.put(f"{sandbox.url}/_sandbox/account", json={"email_credits": 0}, timeout=10).raise_for_status()

    refused = buy(storefront, email, key)
    requests.put(
        f"{sandbox.url}/_sandbox/account", json={"email_credits": None}, timeout=10
    ).raise_for_status()
    served = buy(storefront, email, key)

    refusal = json.loads(refused.body)
    assert refused.status == 503 and refused.retry_after == 3600
    assert refusal["error"]["message"] == (
        "the store's email provider refused the fulfillment email: the store's sending quota is used "
        "up for now; retry later"
    )
    lines = [
        r.getMessage() for r in caplog.records if r.name == "storefront.purchase" and r.levelname == "ERROR"
    ]
    assert lines == [
        "Brevo refused a fulfillment email for the account's sending quota or plan (402 not_enough_credits): "
        "buyers are answered 503 until the plan allows more sends"
    ]
    assert served.status == 200 and len(emails_to(sandbox, email)) == 1


def test_the_purchase_words_every_turn_of_the_executor():
    """The receipt's idempotency check says what each turn means for a retry: the purchase has
    words for every turn the executor can take, in its one table."""
    from shared.exactly_once.executor import Turn
    from shared.purchase.operation import WORDS

    assert set(WORDS) == set(Turn)
    assert all(words and words[0].islower() for words in WORDS.values())


def test_a_caller_comes_in_by_a_known_channel_only():
    """`caller.channel` is one of the doors the docs list (tests/repo/test_docs_printed.py)."""
    assert Caller("a2a").channel == "a2a"
    with pytest.raises(ValueError, match="not 'smtp'"):
        Caller("smtp")
