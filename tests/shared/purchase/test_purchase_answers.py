"""shared.purchase.storefront.Storefront: what each answer of the purchase flow tells its caller (status,
Retry-After, the signed receipt whole: its six checks with their details, billing, error) and what
it counted and sent. In process, on Azurite behind TCP fault proxies (`devstack.faultproxy`; the
counters, the claims and the ledger each on their own) and the Brevo sandbox. Hooks on the flow's
own collaborators say when a store goes down or a rival request runs."""

from __future__ import annotations

import contextlib
import html
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from decimal import Decimal

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue import QueueClient
from jose import jwt

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.errors import (
    InvalidRequest,
    NotConfigured,
    PayloadTooLarge,
    StorageOutage,
    StorefrontError,
)
from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.exactly_once.idempotency import COMPLETED, IdempotencyHandler
from shared.purchase.call import Caller, Outcome, PurchaseCall, StoreConfig, scoped_key_hash, token_id
from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID
from shared.purchase.fulfillment import CONTACT_QUEUED
from shared.purchase.governance import Governance, Limits
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import CHECK_NAMES, RECEIPT_ID_PATTERN, mask_email, sha256
from shared.purchase.schema import KEY_PATTERN, canonical_request
from shared.purchase.storefront import Storefront
from shared.seams.brevo import BrevoClient
from shared.seams.claims import Claim, TableClaimStore
from shared.seams.contact_queue import ContactQueue, open_queue, queue_names
from shared.seams.counters import TableCounters
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import container_client, table_client
from tests.support import drain_queue, new_ec_key, private_pem, unique_email, unique_key

KEYS = KeySet.load(private_pem(new_ec_key()))
SECRET = "answers-test-secret"
BASE_URL = "https://shop.example.org"
LEASE, TTL = 60, 3600
CLIENT = "198.51.100.20"
BUNDLE = BUNDLES[DEFAULT_BUNDLE_ID]
NOT_REACHED = ("skipped", "not reached")
KEY_FREE_AGAIN = "key not used: nothing was sent, so a retry with it runs the purchase again"
ROOMY = Limits(100, Decimal("5"), Decimal("0.01"))
KEY_KEPT = "key kept with its recovery points: a retry with it resumes and sends no second email"


class Crash(BaseException):
    """The host dies here: the flow's except clauses never see it."""


class Hooks:
    """Actions run when the flow reaches a named point, each the given number of times."""

    def __init__(self) -> None:
        self._actions: dict[str, tuple[Callable[[], None], int]] = {}

    def on(self, point: str, action: Callable[[], None], times: int = 1) -> None:
        self._actions[point] = (action, times)

    def reach(self, point: str) -> None:
        action, times = self._actions.pop(point, (None, 0))
        if action is not None:
            if times > 1:
                self._actions[point] = (action, times - 1)
            action()


class HookedQueue:
    """The shop's contact queue, saying when the flow has put the buyer on it (or failed to)."""

    def __init__(self, queue: ContactQueue, hooks: Hooks):
        self.queue, self.hooks = queue, hooks

    def enqueue(self, email: str, name: str) -> None:
        try:
            self.queue.enqueue(email, name)
        finally:
            self.hooks.reach("contact")

    def __getattr__(self, name: str):
        return getattr(self.queue, name)


class HookedBrevo(BrevoClient):
    hooks: Hooks

    def send_email(self, email, idempotency_key=None):
        try:
            return super().send_email(email, idempotency_key)
        finally:
            self.hooks.reach("sent")


class HookedStore(TableClaimStore):
    hooks: Hooks

    def get(self, key_hash: str):
        claim = super().get(key_hash)
        self.hooks.reach("got")
        return claim

    def _holds_claims(self) -> bool:
        self.hooks.reach("scoping query")
        return super()._holds_claims()


class HookedReceipts(BlobReceiptStore):
    hooks: Hooks

    def write_once(self, receipt_id: str, body: bytes, *, ledger_day: str | None = None) -> bytes:
        self.hooks.reach("record")
        stored = super().write_once(receipt_id, body, ledger_day=ledger_day)
        self.hooks.reach("recorded")
        return stored


class HookedGovernance(Governance):
    hooks: Hooks

    def reserve_recipient(self, address: str):
        self.hooks.reach("recipient")
        return super().reserve_recipient(address)

    def reserve_cost(self):
        self.hooks.reach("cost")
        return super().reserve_cost()


class HookedClaims(IdempotencyHandler):
    hooks: Hooks

    def take(self, vacant, fingerprint, receipt_id, progress):
        self.hooks.reach("take")
        return super().take(vacant, fingerprint, receipt_id, progress)

    def checkpoint(self, claim, progress):
        if "receipt" in progress:
            self.hooks.reach("receipt checkpoint")
        return super().checkpoint(claim, progress)


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_123.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Answer:
    outcome: Outcome
    receipt: dict

    @property
    def status(self) -> int:
        return self.outcome.status

    @property
    def checks(self) -> dict[str, tuple[str, str]]:
        return {c["name"]: (c["result"], c["detail"]) for c in self.receipt["checks"]}

    @property
    def error(self) -> dict | None:
        return self.receipt["error"]


@dataclass
class Shop:
    storefront: Storefront
    clock: Clock
    hooks: Hooks
    counters: FaultProxy
    claims: FaultProxy
    records: FaultProxy  # the ledger and repair table
    blob: FaultProxy
    queue: FaultProxy  # the contact queue
    sandbox_url: str
    rebuild: Callable[..., Shop]  # another instance on the same tables, with other settings
    store: TableClaimStore  # straight to Azurite, for the checks
    ledger: TableLedger  # straight to Azurite
    receipts: BlobReceiptStore  # straight to Azurite
    contacts: ContactQueue  # the shop's contact queue, straight to Azurite
    azurite: str
    proxies: list[FaultProxy] = field(default_factory=list)

    def call(
        self,
        email: str | None,
        key: str | None = None,
        *,
        client: str = CLIENT,
        header_key: str | None = None,
        user_agent: str = "answers-test/1.0",
        **arguments: object,
    ) -> Answer:
        args = {**({"email": email} if email is not None else {}), **arguments}
        if key is not None:
            args["idempotency_key"] = key
        call = PurchaseCall(args, header_key, client, Caller("mcp", user_agent))
        outcome = self.storefront.purchase(call)
        return Answer(outcome, json.loads(outcome.body))

    def down(self, *proxies: FaultProxy) -> Callable[[], None]:
        return lambda: [proxy.set("cut") for proxy in proxies]

    def up(self) -> None:
        for proxy in (self.counters, self.claims, self.records, self.blob, self.queue):
            proxy.set("pass")

    def contact(self, email: str) -> dict | None:
        """The buyer's Brevo contact, after a drainer has handed the shop's queue to Brevo."""
        drain_queue(self.contacts, self.azurite, f"{self.sandbox_url}/v3")
        found = requests.get(f"{self.sandbox_url}/_sandbox/contacts", params={"email": email}, timeout=10)
        return next(iter(found.json()), None)

    def emails_to(self, email: str) -> list[dict]:
        return requests.get(f"{self.sandbox_url}/_sandbox/emails", params={"to": email}, timeout=10).json()

    def fault(self, path: str, status: int, match: str, times: int = 1) -> None:
        fault = {"path": path, "status": status, "match": match, "times": times}
        requests.post(f"{self.sandbox_url}/_sandbox/faults", json=fault, timeout=10).raise_for_status()


@pytest.fixture
def make_shop(azurite, sandbox):
    started: list[FaultProxy] = []
    made: list[dict[str, str]] = []

    def proxy(service: str) -> FaultProxy:
        started.append(FaultProxy(endpoint_port(azurite, service)).start())
        return started[-1]

    def make(
        limits: Limits = ROOMY,
        *,
        names: dict[str, str] | None = None,
        clock: Clock | None = None,
        keys: Callable[[], KeySet] = lambda: KEYS,
        **config: object,
    ) -> Shop:
        if names is None:
            names = {n: f"{n}{uuid.uuid4().hex[:10]}" for n in ("gov", "idem", "ledger", "rcpt")}
            names["contacts"] = f"contacts-{uuid.uuid4().hex[:10]}"
            made.append(names)
        clock = clock or Clock()
        hooks, hasher = Hooks(), Hasher(SECRET)
        counters, claims, records, blob = proxy("Table"), proxy("Table"), proxy("Table"), proxy("Blob")
        queue = proxy("Queue")

        def through(p: FaultProxy) -> str:
            return proxied(azurite, table=p) if p is not blob else proxied(azurite, blob=p)

        def contact_queue(connection: str) -> ContactQueue:
            return open_queue(connection, names["contacts"], 2, SECRET, 5)

        receipts = HookedReceipts(container_client(through(blob), names["rcpt"], 1))
        store = HookedStore(table_client(through(claims), names["idem"], 1))
        handler = HookedClaims(
            store,
            receipts,
            lease_seconds=LEASE,
            ttl_seconds=TTL,
            clock=clock,
        )
        brevo = HookedBrevo(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", 5)
        governance = HookedGovernance(
            TableCounters(table_client(through(counters), names["gov"], 1)), hasher, limits, clock=clock
        )
        contacts = HookedQueue(contact_queue(proxied(azurite, queue=queue)), hooks)
        handler.hooks = brevo.hooks = store.hooks = receipts.hooks = governance.hooks = hooks
        settings = {"record_patience_seconds": 0.3, **config}
        storefront = Storefront(
            StoreConfig(BASE_URL, "store@example.com", "The Store", **settings),
            hasher=hasher,
            idempotency=handler,
            governance=governance,
            receipts=receipts,
            brevo=brevo,
            keys=keys,
            ledger=TableLedger(table_client(through(records), names["ledger"], 1)),
            repairs=RepairQueue(table_client(through(records), names["ledger"], 1)),
            contacts=contacts,
            clock=clock,
        )
        return Shop(
            storefront,
            clock,
            hooks,
            counters,
            claims,
            records,
            blob,
            queue,
            sandbox.url,
            lambda other=limits, **more: make(
                other, names=names, clock=clock, keys=keys, **{**config, **more}
            ),
            TableClaimStore(table_client(azurite, names["idem"], 5)),
            TableLedger(table_client(azurite, names["ledger"], 5)),
            BlobReceiptStore(container_client(azurite, names["rcpt"], 5)),
            contact_queue(azurite),
            azurite,
        )

    yield make
    for p in started:
        p.stop()
    for names in made:  # a long run (make mutate) shares one Azurite: leave it as found
        for kind in ("gov", "idem", "ledger"):
            table_client(azurite, names[kind], 5).delete_table()
        with contextlib.suppress(ResourceNotFoundError):
            container_client(azurite, names["rcpt"], 5).delete_container()
        shards, poison = queue_names(names["contacts"], 2)
        for name in (*shards, poison):
            with contextlib.suppress(ResourceNotFoundError):
                QueueClient.from_connection_string(azurite, name).delete_queue()


@pytest.fixture
def shop(make_shop) -> Shop:
    return make_shop()


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def checks(**given: tuple[str, str]) -> dict[str, tuple[str, str]]:
    return {name: given.get(name, NOT_REACHED) for name in CHECK_NAMES}


def logged(caplog) -> list[str]:
    """What the flow told the operator's log."""
    return [r.getMessage() for r in caplog.records if r.name == "storefront.purchase"]


def outage(text: str) -> str:
    """A pattern for an outage as the storage adapters word it, after `text`."""
    return re.escape(text) + r"[a-z ]+ unavailable: [A-Za-z]+"


def unavailable_for_now(answer: Answer, message: str) -> None:
    """A 503 the caller is told to retry in 5 seconds, saying why."""
    assert (answer.status, answer.outcome.retry_after) == (503, 5)
    assert answer.error == {"code": "store_unavailable", "message": message, "retry_after_seconds": 5}
    assert answer.receipt["status"] == "failed"


def verified(answer: Answer) -> bool:
    return signatures.verify(answer.outcome.body, KEYS.jwks()).valid


def refused_alone(answer: Answer, status: int, code: str, message: str, retry_after: int | None) -> None:
    """A refusal before the input was read: nothing about a bundle, a buyer or a cost."""
    assert (answer.status, answer.outcome.retry_after) == (status, retry_after)
    assert answer.receipt["status"] == ("refused" if status < 500 else "failed")
    assert answer.error == {"code": code, "message": message, "retry_after_seconds": retry_after}
    assert (answer.receipt["bundle"], answer.receipt["buyer"]) == (None, None)
    assert answer.receipt["billing"] == {
        "amount": "0.00",
        "currency": "USD",
        "cost_estimate": "0.00",
        "cost_currency": "USD",
    }
    assert (answer.receipt["receipt_url"], answer.receipt["download"]) == (None, None)
    assert verified(answer)


# --- fulfilled -------------------------------------------------------------------------------------


def test_a_keyed_purchase_answers_a_signed_receipt_saying_what_each_check_found(shop):
    email, key = unique_email("whole"), unique_key()

    answer = shop.call(email, key, name="Ada Lovelace", user_agent="agent/" + "x" * 300)

    receipt = answer.receipt
    claim = shop.store.get(scoped_key_hash(Hasher(SECRET), key, email))
    expires = int(shop.clock.now) + 7 * 86400
    assert (answer.status, answer.outcome.retry_after, answer.outcome.replayed) == (200, None, False)
    assert {k: v for k, v in receipt.items() if k not in ("receipt_id", "signature", "checks")} == {
        "version": 1,
        "issued_at": iso(shop.clock.now),
        "operation": "purchase_free_bundle",
        "status": "fulfilled",
        "bundle": {"id": BUNDLE.id, "title": BUNDLE.title},
        "buyer": {"id": Hasher(SECRET).email(email), "hint": mask_email(email)},
        "billing": {"amount": "0.00", "currency": "USD", "cost_estimate": "0.01", "cost_currency": "USD"},
        "receipt_url": f"{BASE_URL}/api/receipts/{receipt['receipt_id']}",
        "download": {"token_id": token_id(claim), "expires_at": iso(expires)},
        "error": None,
        "caller": {
            "channel": "mcp",
            "user_agent": ("agent/" + "x" * 300)[:200],
            "agent": {"verified": False},
        },
    }
    message_id = shop.emails_to(email)[0]["messageId"]
    assert answer.checks == checks(
        idempotency=("pass", "key claimed; a retry with it replays this receipt"),
        input_schema=("pass", "arguments match the input schema"),
        rate_limit=("pass", "within 100 per hour from this client and 3 per day to this recipient"),
        cost_ceiling=("pass", "within $5 per day (this purchase $0.01)"),
        contact_upsert=("pass", CONTACT_QUEUED),
        fulfillment_email=("pass", f"accepted by Brevo as {message_id}"),
    )
    assert shop.contacts.backlog().waiting == 1  # the buyer is on the queue, as the check says
    assert claim.result_id == receipt["receipt_id"]
    assert verified(answer)
    assert shop.storefront.stored_receipt(receipt["receipt_id"]) == answer.outcome.body
    listed = shop.ledger.day(receipt["issued_at"][:10]).receipts
    assert [entry.receipt_id for entry in listed] == [receipt["receipt_id"]]
    assert shop.storefront.repair_receipts() == 0  # on record in both stores: nothing to repair


def test_the_email_greets_the_buyer_by_name_and_carries_the_link_the_receipt_names(shop):
    email, key = unique_email("mail"), unique_key()

    answer = shop.call(email, key, name="Zoë O'Brien")

    [sent] = shop.emails_to(email)
    token = next(link for link in sent["links"] if "/api/download/" in link).rsplit("/", 1)[1]
    link = f"{BASE_URL}/api/download/{token}"
    until = answer.receipt["download"]["expires_at"]
    claims = jwt.get_unverified_claims(token)
    assert (claims["jti"], claims["iss"]) == (answer.receipt["download"]["token_id"], BASE_URL)
    assert claims["sub"] == answer.receipt["bundle"]["id"]  # the link downloads the bundle bought
    assert shop.contact(email)["attributes"] == {"FIRSTNAME": "Zoë O'Brien"}
    assert sent["sender"] == {"email": "store@example.com", "name": "The Store"}
    assert sent["to"] == [{"email": email, "name": "Zoë O'Brien"}]
    assert sent["subject"] == f"Your {BUNDLE.title} is ready"
    assert sent["textContent"] == (
        f'Hello Zoë O\'Brien,\n\nYour free bundle "{BUNDLE.title}" is ready.\n\n'
        f"Download it here (link valid until {until}):\n{link}\n"
    )
    assert sent["htmlContent"] == (
        f"<p>Hello Zoë O&#x27;Brien,</p>"
        f"<p>Your free bundle <strong>{html.escape(BUNDLE.title)}</strong> is ready.</p>"
        f'<p><a href="{html.escape(link)}">Download {html.escape(BUNDLE.title)}</a></p>'
        f"<p>The link is valid until {until}.</p>"
    )
    assert sent["tags"][:2] == ["storefront", BUNDLE.id]


def test_a_buyer_without_a_name_is_greeted_plainly(shop):
    email = unique_email("noname")

    shop.call(email)

    [sent] = shop.emails_to(email)
    assert sent["textContent"].startswith("Hello,\n\n")
    assert sent["htmlContent"].startswith("<p>Hello,</p>")
    assert sent["tags"] == ["storefront", BUNDLE.id]  # no claim, so no claim tag


def test_a_purchase_without_a_key_says_a_retry_would_buy_again_and_mints_its_own_token(shop):
    email = unique_email("nokey")

    first, second = shop.call(email), shop.call(email)

    assert (first.status, second.status) == (200, 200)
    assert first.checks["idempotency"] == ("skipped", "no key supplied; a retry would buy again")
    assert first.receipt["receipt_id"] != second.receipt["receipt_id"]
    assert first.receipt["download"]["token_id"] != second.receipt["download"]["token_id"]
    assert first.receipt["download"]["expires_at"] == iso(int(shop.clock.now) + 7 * 86400)
    assert len(shop.emails_to(email)) == 2


def test_a_key_in_the_header_protects_the_purchase_as_one_in_the_arguments_does(shop):
    email, key = unique_email("header"), unique_key()

    first = shop.call(email, header_key=f"  {key} ")
    again = shop.call(email, header_key=key)

    assert first.checks["idempotency"] == ("pass", "key claimed; a retry with it replays this receipt")
    assert (again.status, again.outcome.replayed, again.outcome.body) == (200, True, first.outcome.body)
    assert len(shop.emails_to(email)) == 1


def test_a_contact_that_exists_is_left_unchanged_and_said_so(shop):
    email = unique_email("known")
    shop.call(email, name="Ada")
    made = shop.contact(email)

    again = shop.call(email, name="Someone Else")

    assert again.checks["contact_upsert"] == ("pass", CONTACT_QUEUED)
    assert "an existing contact left unchanged" in CONTACT_QUEUED
    after = shop.contact(email)  # the second buyer handed to Brevo too
    assert shop.contacts.backlog().waiting == 0
    assert (after["attributes"], after["modifications"]) == ({"FIRSTNAME": "Ada"}, 0)
    assert after == made


def test_a_zero_cost_per_purchase_bills_nothing_and_never_reaches_the_ceiling(make_shop):
    shop = make_shop(Limits(100, Decimal("0.01"), Decimal("0")))

    answers = [shop.call(unique_email("free"), client=f"198.51.100.{30 + i}") for i in range(3)]

    assert [a.status for a in answers] == [200, 200, 200]
    assert answers[-1].receipt["billing"]["cost_estimate"] == "0.00"
    assert answers[-1].checks["cost_ceiling"] == ("pass", "within $0.01 per day (this purchase $0)")


# --- refused before anything runs ------------------------------------------------------------------


def test_a_key_still_running_is_409_with_the_seconds_its_lease_has_left(shop):
    email, key = unique_email("running"), unique_key()
    shop.hooks.on("contact", lambda: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        shop.call(email, key)

    at_once = shop.call(email, key)
    shop.clock.now += LEASE - 2.5
    near_the_end = shop.call(email, key)

    message = "a request with this idempotency key is still running; retry shortly"
    refused_alone(at_once, 409, "idempotency_key_in_use", message, 5)
    refused_alone(near_the_end, 409, "idempotency_key_in_use", message, 3)
    assert at_once.checks == checks(idempotency=("fail", message))
    assert shop.emails_to(email) == []


def test_a_key_used_for_another_request_is_422_and_sends_nothing_more(shop):
    email, key = unique_email("reused"), unique_key()
    shop.call(email, key)

    other = shop.call(email, key, name="Someone Else")

    message = "this idempotency key was already used with a different request"
    refused_alone(other, 422, "idempotency_key_reused", message, None)
    assert other.checks == checks(idempotency=("fail", message))
    assert len(shop.emails_to(email)) == 1


def test_a_malformed_request_reusing_a_key_is_told_its_shape_on_the_receipt_not_the_key(shop):
    email, key = unique_email("reshaped"), unique_key()
    shop.call(email, key)

    malformed = shop.call(email, key, coupon="FREE")

    message = "unknown field(s): coupon"
    assert (malformed.status, malformed.error["code"], malformed.error["message"]) == (
        400,
        "invalid_request",
        message,
    )
    reused = "this idempotency key was already used with a different request"
    assert malformed.checks == checks(idempotency=("fail", reused), input_schema=("fail", message))
    assert len(shop.emails_to(email)) == 1


def test_a_malformed_key_is_400_and_counts_nothing(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))

    bad = shop.call(unique_email("badkey"), "short")
    good = shop.call(unique_email("afterbadkey"))

    message = f"idempotency_key must be 8-128 characters of A-Z a-z 0-9 . _ - (pattern {KEY_PATTERN})"
    refused_alone(bad, 400, "invalid_idempotency_key", message, None)
    assert bad.checks == checks(idempotency=("fail", message))
    assert good.status == 200


def test_the_refusal_of_a_request_that_could_not_be_read_fails_only_its_input_schema(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))
    call = PurchaseCall(None, None, CLIENT, Caller("http", "curl/8"))

    unreadable = shop.storefront.refuse(call, InvalidRequest("the body is not JSON"))
    too_large = shop.storefront.refuse(call, PayloadTooLarge("the body is over 64 KiB"))
    unset = shop.storefront.refuse(call, NotConfigured("the store is not configured"))
    broken = shop.storefront.refuse(call, StorefrontError("the request could not be handled"))
    after = shop.call(unique_email("afterrefusal"))

    for answer, (status, code, message) in (
        (unreadable, (400, "invalid_request", "the body is not JSON")),
        (too_large, (413, "payload_too_large", "the body is over 64 KiB")),
        (unset, (503, "not_configured", "the store is not configured")),
        (broken, (500, "internal_error", "the request could not be handled")),
    ):
        answer = Answer(answer, json.loads(answer.body))
        refused_alone(answer, status, code, message, None)
        assert answer.checks == checks(input_schema=("fail", message))
        assert answer.receipt["caller"] == {
            "channel": "http",
            "user_agent": "curl/8",
            "agent": {"verified": False},
        }
    assert after.status == 200  # a refusal counts nothing against the client's one purchase an hour


# --- refused by the guards -------------------------------------------------------------------------


def test_bad_input_counts_against_the_rate_and_leaves_the_key_free(make_shop):
    shop = make_shop(Limits(2, Decimal("5"), Decimal("0.01")))
    key = unique_key()

    bad = shop.call("not-an-address", key)
    good = shop.call(unique_email("good"), key)
    over = shop.call(unique_email("over"))

    assert (bad.status, bad.error["code"]) == (422, "invalid_email")
    assert bad.checks == checks(
        idempotency=("pass", KEY_FREE_AGAIN),
        input_schema=("fail", "email is not a valid address"),
        rate_limit=("pass", "within 2 per hour from this client"),
    )
    assert bad.receipt["buyer"] is None and bad.receipt["receipt_url"] is None
    assert good.status == 200
    assert (over.status, over.error["code"]) == (429, "rate_limited")


def test_the_rate_limit_refusal_says_why_and_when_to_retry(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))
    shop.call(unique_email("first"))

    refused = shop.call(unique_email("second"), unique_key())

    message = refused.error["message"]
    assert (refused.status, refused.error["code"]) == (429, "rate_limited")
    assert message.startswith("rate limit reached: 1 purchase per hour")
    assert (
        refused.outcome.retry_after
        == refused.error["retry_after_seconds"]
        == 3600 - int(shop.clock.now) % 3600
    )
    assert refused.checks == checks(idempotency=("pass", KEY_FREE_AGAIN), rate_limit=("fail", message))
    assert refused.receipt["status"] == "refused" and refused.receipt["billing"]["cost_estimate"] == "0.00"
    assert verified(refused)


def test_a_recipient_refusal_gives_the_clients_count_back(make_shop):
    shop = make_shop(Limits(2, Decimal("5"), Decimal("0.01"), recipient_limit_per_day=1))
    email = unique_email("recipient")
    shop.call(email)

    refused = shop.call(email)
    other = shop.call(unique_email("other"))
    over = shop.call(unique_email("over"))

    assert (refused.status, refused.error["code"]) == (429, "rate_limited")
    assert refused.error["message"].startswith("recipient limit reached: 1 email per UTC day")
    assert refused.checks["rate_limit"] == ("fail", refused.error["message"])
    assert refused.checks["input_schema"] == ("pass", "arguments match the input schema")
    assert other.status == 200  # the refused purchase's count was given back
    assert over.status == 429
    assert len(shop.emails_to(email)) == 1


def test_the_cost_ceiling_refusal_gives_the_rate_and_recipient_counts_back(make_shop):
    shop = make_shop(Limits(1, Decimal("0.01"), Decimal("0.01"), recipient_limit_per_day=1))
    shop.call(unique_email("spent"), client="198.51.100.40")
    email = unique_email("late")

    refused = shop.call(email, client="198.51.100.41")
    raised = shop.rebuild(Limits(1, Decimal("1"), Decimal("0.01"), recipient_limit_per_day=1))
    later = raised.call(email, client="198.51.100.41")

    assert (refused.status, refused.error["code"]) == (429, "cost_ceiling_reached")
    assert refused.outcome.retry_after == 86400 - int(shop.clock.now) % 86400
    assert refused.checks["rate_limit"] == (
        "pass",
        "within 1 per hour from this client and 1 per day to this recipient",
    )
    assert refused.checks["cost_ceiling"] == ("fail", refused.error["message"])
    assert refused.error["message"].startswith("daily cost ceiling of $0.01 reached")
    assert later.status == 200  # neither the client's one purchase nor the recipient's one email was used


def test_counters_that_cannot_be_reached_are_not_enforced_and_say_so(shop, caplog):
    shop.counters.set("cut")

    keyed = shop.call(unique_email("degraded"), unique_key())
    unkeyed = shop.call(unique_email("degraded"))

    degraded = ("degraded", "counter store unreachable; not enforced")
    for answer in (keyed, unkeyed):
        assert answer.status == 200
        assert answer.checks["rate_limit"] == degraded
        assert answer.checks["cost_ceiling"] == degraded
    warned = logged(caplog)
    for check in ("rate_limit", "cost_ceiling"):
        assert [w for w in warned if re.fullmatch(outage(f"{check} not enforced: "), w)], warned


def test_an_unkeyed_purchase_with_counters_and_blob_down_sends_nothing(shop):
    email = unique_email("nowhere")
    shop.counters.set("cut")
    shop.blob.set("cut")

    refused = shop.call(email)

    message = (
        "table and blob storage are both unreachable, so this purchase could not be recorded; "
        "nothing was sent"
    )
    unavailable_for_now(refused, message)
    assert refused.receipt["status"] == "failed"
    assert refused.checks["contact_upsert"] == NOT_REACHED
    assert shop.emails_to(email) == []


def test_a_keyed_purchase_with_its_counters_down_still_sends_when_blob_is_down_too(shop):
    email = unique_email("keyednoblob")
    shop.counters.set("cut")
    shop.blob.set("cut")
    shop.hooks.on("sent", shop.up)

    answer = shop.call(email, unique_key())

    assert answer.status == 200
    assert len(shop.emails_to(email)) == 1


# --- the claim store ------------------------------------------------------------------------------


def test_a_key_store_down_as_the_purchase_starts_is_503_with_retry_after_and_sends_nothing(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))
    email = unique_email("keydown")
    shop.claims.set("cut")

    refused = shop.call(email, unique_key())
    shop.up()
    after = shop.call(unique_email("afterkeydown"))

    message = "the idempotency store is unreachable, so this key cannot be protected; nothing was sent"
    refused_alone(refused, 503, "store_unavailable", message + "; retry shortly", 5)
    assert refused.checks == checks(idempotency=("fail", message))
    assert shop.emails_to(email) == []
    assert after.status == 200  # nothing was counted


def test_an_operator_who_runs_keys_unprotected_gets_a_degraded_purchase_instead(make_shop, caplog):
    shop = make_shop(idempotency_fail_open=True)
    email, key = unique_email("failopen"), unique_key()
    shop.claims.set("cut")

    at_start = shop.call(email, key)
    shop.up()
    shop.hooks.on("take", shop.down(shop.claims))
    at_take = shop.call(unique_email("failopentake"), unique_key())

    for answer in (at_start, at_take):
        assert answer.status == 200
        assert answer.checks["idempotency"] == ("degraded", "store unreachable; retries are not protected")
        assert answer.receipt["receipt_url"] is not None
    said = "idempotency store unreachable, proceeding without it: "
    warned = [w for w in logged(caplog) if w.startswith(said)]
    assert len(warned) == 2 and all("table" in w.removeprefix(said).lower() for w in warned), warned


def test_a_claim_write_whose_answer_never_comes_is_503_and_keeps_the_counts(make_shop):
    shop = make_shop(Limits(2, Decimal("5"), Decimal("0.01")))
    email, key = unique_email("takedown"), unique_key()
    shop.hooks.on("take", shop.down(shop.claims))

    refused = shop.call(email, key)
    shop.up()
    retried = shop.call(email, key)
    over = shop.call(unique_email("takedownover"))

    message = (
        "the idempotency store did not answer as this key was claimed; nothing was sent. A retry with the "
        "key answers 409 until the claim's lease ends if the claim landed, then resumes"
    )
    assert (refused.status, refused.outcome.retry_after, refused.error["code"]) == (
        503,
        5,
        "store_unavailable",
    )
    assert refused.error["message"] == message
    assert refused.checks["idempotency"] == ("fail", message)
    assert refused.checks["cost_ceiling"][0] == "pass"
    assert retried.status == 200 and len(shop.emails_to(email)) == 1
    assert over.status == 429  # the uncertain claim's counts stayed: 2 of 2 used


def test_a_key_taken_by_a_rival_between_the_look_and_the_claim_is_409_and_gives_its_counts_back(make_shop):
    shop = make_shop(Limits(2, Decimal("5"), Decimal("0.01")))
    email, key = unique_email("rival"), unique_key()
    rival: list[Answer] = []
    shop.hooks.on("take", lambda: rival.append(shop.call(email, key, client="198.51.100.50")))

    lost = shop.call(email, key)
    replay = shop.call(email, key)
    again = shop.call(unique_email("rivalafter"))

    message = "a request with this idempotency key is already running; retry shortly"
    assert (lost.status, lost.outcome.retry_after) == (409, 1)
    assert lost.error == {"code": "idempotency_key_in_use", "message": message, "retry_after_seconds": 1}
    assert lost.checks["idempotency"] == ("fail", message)
    assert rival[0].status == 200 and replay.outcome.body == rival[0].outcome.body
    assert again.status == 200  # the lost request's count was given back: 1 of 2 used before this
    assert len(shop.emails_to(email)) == 1


def test_a_holder_whose_claim_was_taken_over_stops_before_sending_with_409(shop):
    email, key = unique_email("takenover"), unique_key()
    taker: list[Answer] = []

    def lease_runs_out() -> None:
        shop.clock.now += LEASE + 1
        taker.append(shop.call(email, key))

    shop.hooks.on("contact", lease_runs_out)

    stopped = shop.call(email, key)

    message = "another request took over this idempotency key; retry shortly"
    assert (stopped.status, stopped.outcome.retry_after) == (409, 1)
    assert stopped.error == {"code": "idempotency_key_in_use", "message": message, "retry_after_seconds": 1}
    assert taker[0].status == 200
    assert len(shop.emails_to(email)) == 1
    assert shop.call(email, key).outcome.body == taker[0].outcome.body


# --- failures after the claim ---------------------------------------------------------------------


def test_a_store_missing_its_secrets_is_503_naming_them_and_gives_the_counts_back(make_shop):
    shop = make_shop(
        Limits(1, Decimal("5"), Decimal("0.01")), missing_secrets=("STOREFRONT_SIGNING_KEY", "BREVO_API_KEY")
    )
    email, key = unique_email("unset"), unique_key()

    refused = shop.call(email, key)
    configured = shop.rebuild(missing_secrets=())
    retried = configured.call(email, key)

    message = refused.error["message"]
    assert (refused.status, refused.outcome.retry_after) == (503, None)
    assert refused.error == {"code": "not_configured", "message": message, "retry_after_seconds": None}
    assert message.startswith("the store is not configured: STOREFRONT_SIGNING_KEY, BREVO_API_KEY unset")
    assert "Key Vault" in message and "health check names each" in message
    assert refused.receipt["status"] == "failed"
    assert refused.checks["idempotency"] == ("pass", KEY_FREE_AGAIN)
    assert refused.checks["contact_upsert"] == NOT_REACHED
    assert verified(refused)
    assert retried.status == 200  # the key ran again, and the client's one purchase was still free
    assert len(shop.emails_to(email)) == 1


def test_a_store_whose_signing_key_is_unset_answers_an_unsigned_refusal(make_shop):
    shop = make_shop(keys=lambda: KeySet.load(""))
    email = unique_email("unsigned")

    refused = shop.call(email, unique_key())

    assert (refused.status, refused.error["code"]) == (503, "not_configured")
    assert refused.error["message"].startswith("STOREFRONT_SIGNING_KEY is not set")
    assert refused.receipt["signature"] is None
    assert shop.emails_to(email) == []


def test_a_contact_queue_that_cannot_take_the_buyer_frees_the_key_and_gives_the_counts_back(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))
    email, key = unique_email("contactdown"), unique_key()
    shop.queue.set("cut")

    refused = shop.call(email, key)
    nothing_sent = shop.emails_to(email)
    shop.up()
    retried = shop.call(email, key)

    unavailable_for_now(
        refused,
        "the buyer could not be queued to become a Brevo contact: storage is unreachable; no email was sent",
    )
    assert refused.checks["contact_upsert"] == ("fail", refused.error["message"])
    assert refused.checks["fulfillment_email"] == NOT_REACHED
    assert refused.checks["idempotency"] == ("pass", KEY_FREE_AGAIN)
    assert nothing_sent == []
    assert retried.status == 200 and len(shop.emails_to(email)) == 1  # the client's one purchase was free
    assert shop.contacts.backlog().waiting == 1


def test_a_send_brevo_refused_keeps_the_key_and_its_counts_and_the_retry_resumes(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01"), recipient_limit_per_day=1))
    email, key = unique_email("sendrefused"), unique_key()
    shop.fault("/v3/smtp/email", 503, email)

    refused = shop.call(email, key)
    other = shop.call(unique_email("sendrefusedother"))
    resumed = shop.call(email, key)

    assert (refused.status, refused.error["code"]) == (503, "upstream_unavailable")
    assert refused.checks["idempotency"] == ("pass", KEY_KEPT)
    assert refused.checks["fulfillment_email"] == ("fail", refused.error["message"])
    assert (refused.receipt["download"], refused.receipt["receipt_url"]) == (None, None)
    assert other.status == 429  # the client's one purchase stays counted
    assert resumed.status == 200
    assert resumed.checks["idempotency"] == (
        "pass",
        "key claimed after an interrupted attempt; resumed from its recovery points",
    )
    assert resumed.checks["contact_upsert"] == ("pass", CONTACT_QUEUED)
    assert shop.contacts.backlog().waiting == 1  # queued by the first attempt, not again by the resume
    assert resumed.checks["rate_limit"] == refused.checks["rate_limit"]
    assert len(shop.emails_to(email)) == 1


def test_a_release_the_table_never_confirms_keeps_the_key_held_until_its_lease_ends(make_shop):
    shop = make_shop(Limits(1, Decimal("5"), Decimal("0.01")))
    email, key = unique_email("unreleased"), unique_key()
    shop.queue.set("cut")
    shop.hooks.on("contact", shop.down(shop.claims))

    refused = shop.call(email, key)
    shop.up()
    held = shop.call(email, key)
    shop.clock.now += LEASE + 1
    resumed = shop.call(email, key)

    assert (refused.status, refused.error["code"]) == (503, "store_unavailable")
    assert refused.checks["idempotency"] == (
        "pass",
        "key still held (the store did not confirm its release): nothing was sent; a retry with it "
        "answers 409 until the lease ends, then resumes",
    )
    assert held.status == 409
    assert resumed.status == 200  # counted once: the client's one purchase is the claim's own
    assert len(shop.emails_to(email)) == 1


def test_a_receipt_no_store_would_take_is_503_for_a_key_and_the_retry_gets_it(shop):
    email, key = unique_email("unrecorded"), unique_key()
    shop.hooks.on("sent", shop.down(shop.blob, shop.records, shop.claims))

    refused = shop.call(email, key)
    shop.up()
    shop.clock.now += LEASE + 1
    retried = shop.call(email, key)

    message = (
        "the bundle was sent, but its receipt could not be recorded yet; retry with the same idempotency "
        "key to receive it"
    )
    unavailable_for_now(refused, message)
    assert retried.status == 200 and retried.receipt["status"] == "fulfilled"
    assert shop.receipts.read(retried.receipt["receipt_id"]) == retried.outcome.body
    assert len(shop.emails_to(email)) == 1


def test_an_unkeyed_receipt_no_store_would_take_is_still_answered(shop, caplog):
    email = unique_email("unrecordedunkeyed")
    shop.hooks.on("sent", shop.down(shop.blob, shop.records))

    answer = shop.call(email)

    rid = answer.receipt["receipt_id"]
    assert answer.status == 200 and answer.receipt["status"] == "fulfilled"
    shop.up()
    assert shop.receipts.read(rid) is None
    warned = logged(caplog)
    assert re.fullmatch(outage(f"receipt {rid} not in Blob yet: "), warned[0]), warned
    assert re.fullmatch(outage(f"receipt {rid} not queued for repair either: "), warned[1]), warned
    assert warned[2:] == [f"receipt {rid} answered but not on record: both stores unreachable"]


def test_a_receipt_blob_could_not_take_is_served_from_the_repair_queue_until_repaired(shop, caplog):
    email = unique_email("queued")
    shop.blob.set("cut")

    answer = shop.call(email, unique_key())
    served = shop.storefront.stored_receipt(answer.receipt["receipt_id"])
    shop.up()
    repaired = shop.storefront.repair_receipts()

    assert answer.status == 200
    assert served == answer.outcome.body
    assert repaired == 1
    rid = answer.receipt["receipt_id"]
    assert [w for w in logged(caplog) if re.fullmatch(outage(f"receipt {rid} not in Blob yet: "), w)]
    assert shop.receipts.read(answer.receipt["receipt_id"]) == answer.outcome.body


def test_a_receipt_lookup_with_both_stores_down_is_an_outage_not_a_missing_receipt(shop):
    answer = shop.call(unique_email("lookup"))
    shop.blob.set("cut")
    shop.records.set("cut")

    with pytest.raises(StorageOutage):
        shop.storefront.stored_receipt(answer.receipt["receipt_id"])


def test_a_key_replays_no_longer_than_its_download_link_lives(make_shop):
    shop = make_shop(download_token_ttl_seconds=600)
    email, key = unique_email("shortlink"), unique_key()
    first = shop.call(email, key)

    shop.clock.now += 599
    replay = shop.call(email, key)
    shop.clock.now += 2
    after = shop.call(email, key)

    assert replay.outcome.replayed and replay.outcome.body == first.outcome.body
    assert after.status == 200 and not after.outcome.replayed
    assert after.receipt["receipt_id"] != first.receipt["receipt_id"]
    assert len(shop.emails_to(email)) == 2


def test_expired_keys_are_reaped_and_counted(shop):
    shop.call(unique_email("reap"), unique_key())
    shop.clock.now += LEASE + TTL + 1

    assert shop.storefront.reap_expired_keys() == 1
    assert shop.storefront.reap_expired_keys() == 0


def test_a_receipt_url_names_the_store_and_the_receipt(shop):
    assert shop.storefront.receipt_url("rcpt_abc") == f"{BASE_URL}/api/receipts/rcpt_abc"


def test_every_receipt_id_is_new_and_well_formed(shop):
    answers = [shop.call(unique_email("ids")) for _ in range(2)]

    ids = [a.receipt["receipt_id"] for a in answers]
    assert all(re.fullmatch(RECEIPT_ID_PATTERN, i) for i in ids) and ids[0] != ids[1]


# --- the claim state machine under races and outages ------------------------------------------------


def test_a_takeover_lost_to_a_rival_on_every_attempt_is_409_retry_in_a_second(shop):
    email, key = unique_email("racing"), unique_key()
    key_hash = scoped_key_hash(Hasher(SECRET), key, email)
    shop.hooks.on("contact", lambda: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        shop.call(email, key)
    shop.clock.now += LEASE + 1  # the holder is dead: its claim may be taken over

    def rival_writes() -> None:  # another instance rewrites the claim after each look: its ETag moves on
        shop.store.update(shop.store.get(key_hash))

    shop.hooks.on("got", rival_writes, times=5)
    lost = shop.call(email, key)
    taken = shop.call(email, key)

    message = "a request with this idempotency key is still running; retry shortly"
    refused_alone(lost, 409, "idempotency_key_in_use", message, 1)
    assert taken.status == 200
    assert taken.checks["idempotency"] == (
        "pass",
        "key claimed after an interrupted attempt; resumed from its recovery points",
    )
    assert len(shop.emails_to(email)) == 1


def test_an_outage_during_the_one_time_look_for_pre_scoping_claims_is_503_and_the_look_is_made_again(
    shop,
):
    email, key = unique_email("scoping"), unique_key()
    hasher, body = Hasher(SECRET), b'{"receipt_id": "rcpt_from_before_scoping"}'
    shop.store.create(  # as the version before keys were scoped wrote it: under the key's hash alone
        Claim(
            hasher.idempotency_key(key),
            COMPLETED,
            hasher.request(canonical_request({"email": email, "idempotency_key": key})),
            "rcpt_from_before_scoping",
            shop.clock.now,
            shop.clock.now + TTL,
            progress={"receipt": body.decode()},
            result_sha256=sha256(body),
        )
    )
    shop.hooks.on("scoping query", shop.down(shop.claims))

    refused = shop.call(email, key)
    shop.up()
    replay = shop.call(email, key)

    message = "the idempotency store is unreachable, so this key cannot be protected; nothing was sent"
    refused_alone(refused, 503, "store_unavailable", message + "; retry shortly", 5)
    assert (replay.status, replay.outcome.replayed, replay.outcome.body) == (200, True, body)
    assert shop.emails_to(email) == []


def test_a_taker_that_resumes_with_the_receipt_alone_replays_no_longer_than_the_emailed_link(make_shop):
    shop = make_shop(download_token_ttl_seconds=600)
    email, key = unique_email("receiptalone"), unique_key()
    shop.hooks.on("record", lambda: (_ for _ in ()).throw(Crash()))  # the receipt rides on the claim
    with pytest.raises(Crash):
        shop.call(email, key)
    shop.clock.now += LEASE + 1

    finished = shop.call(email, key)
    shop.clock.now += 600 - LEASE - 2
    replay = shop.call(email, key)
    shop.clock.now += 2
    after = shop.call(email, key)

    assert finished.status == 200 and replay.outcome.body == finished.outcome.body
    assert after.status == 200 and not after.outcome.replayed
    assert len(shop.emails_to(email)) == 2  # the link had died: the key bought again


def test_a_taker_answers_the_receipt_riding_on_the_claim_even_while_blob_is_down(shop):
    email, key = unique_email("inherits"), unique_key()
    shop.hooks.on("record", lambda: (_ for _ in ()).throw(Crash()))
    with pytest.raises(Crash):
        shop.call(email, key)
    shop.clock.now += LEASE + 1
    shop.blob.set("cut")
    carried = shop.store.get(scoped_key_hash(Hasher(SECRET), key, email)).progress["receipt"]

    finished = shop.call(email, key)  # the receipt it carries is queued for repair, then answered
    shop.up()
    shop.storefront.repair_receipts()

    assert finished.status == 200 and finished.outcome.body == carried.encode()
    assert shop.receipts.read(finished.receipt["receipt_id"]) == finished.outcome.body
    assert len(shop.emails_to(email)) == 1


def answered_while_the_claim_missed_its_receipt(shop: Shop, email: str, key: str) -> Answer:
    """Blob is down, so the receipt is queued for repair; the claim store drops out just as the
    recovery point with the receipt is written and stays out until the answer: the caller has its
    200, and the claim, still processing, does not carry the receipt."""
    shop.blob.set("cut")
    shop.hooks.on("receipt checkpoint", shop.down(shop.claims))
    answered = shop.call(email, key)
    shop.claims.set("pass")
    shop.clock.now += LEASE + 1
    return answered


def test_a_taker_adopts_the_receipt_its_predecessor_queued_and_answers_the_same_bytes(shop, caplog):
    email, key = unique_email("adopts"), unique_key()
    first = answered_while_the_claim_missed_its_receipt(shop, email, key)

    taken = shop.call(email, key)

    assert first.status == 200
    assert (taken.status, taken.outcome.body) == (200, first.outcome.body)
    warned = logged(caplog)
    point = re.escape("recovery point not recorded (") + r"[a-z ]+ unavailable: [A-Za-z]+"
    assert [w for w in warned if re.fullmatch(point + re.escape("); the lease still holds the key"), w)]
    assert len(shop.emails_to(email)) == 1


def test_a_taker_that_cannot_look_for_a_queued_receipt_is_503_and_issues_none(shop):
    email, key = unique_email("cannotlook"), unique_key()
    first = answered_while_the_claim_missed_its_receipt(shop, email, key)
    shop.records.set("cut")

    refused = shop.call(email, key)
    shop.up()
    taken = shop.call(email, key)

    message = (
        "the receipt an earlier attempt may have issued cannot be looked up yet; retry with the same "
        "idempotency key"
    )
    unavailable_for_now(refused, message)
    assert taken.outcome.body == first.outcome.body
    assert len(shop.emails_to(email)) == 1


def test_arguments_that_are_not_an_object_with_a_key_in_the_header_are_400(shop):
    call = PurchaseCall(["ada@example.org"], unique_key(), CLIENT, Caller("http"))

    answer = Answer(outcome := shop.storefront.purchase(call), json.loads(outcome.body))

    assert (answer.status, answer.error["code"]) == (400, "invalid_request")
    assert answer.checks["idempotency"] == ("pass", KEY_FREE_AGAIN)
    assert answer.checks["input_schema"][0] == "fail"


def test_a_receipt_blob_took_while_the_ledger_and_claims_were_out_is_answered_and_logged(shop, caplog):
    email, key = unique_email("ledgerout"), unique_key()
    shop.hooks.on("record", shop.down(shop.records, shop.claims))

    answer = shop.call(email, key)

    rid = answer.receipt["receipt_id"]
    assert answer.status == 200
    assert shop.receipts.read(rid) == answer.outcome.body
    warned = logged(caplog)
    ledger = re.escape(f"receipt {rid} not in the ledger yet (the repair timer adds it): ")
    assert [w for w in warned if re.fullmatch(ledger + r"[a-z ]+ unavailable: [A-Za-z]+", w)], warned
    claim = re.escape("claim not completed (") + r"[a-z ]+ unavailable: [A-Za-z]+"
    assert [
        w for w in warned if re.fullmatch(claim + re.escape("); a retry after the lease will finish it"), w)
    ]
    shop.up()
    assert shop.storefront.repair_receipts() == 1  # the blob's tag told the timer its row was missing
    assert [e.receipt_id for e in shop.ledger.day(answer.receipt["issued_at"][:10]).receipts] == [rid]


def test_a_receipt_the_stores_take_within_the_patience_is_answered(make_shop):
    shop = make_shop(record_patience_seconds=15.0)
    email, key = unique_email("patience"), unique_key()
    shop.hooks.on("sent", lambda: [p.set("cut", seconds=5) for p in (shop.blob, shop.records)])

    answer = shop.call(email, key)
    started = time.monotonic()
    at_once = shop.call(unique_email("patience"), unique_key())

    assert answer.status == 200
    assert shop.receipts.read(answer.receipt["receipt_id"]) == answer.outcome.body
    assert at_once.status == 200 and time.monotonic() - started < 7.5  # nothing to wait for


def test_a_taker_whose_own_receipt_lost_to_the_one_on_record_answers_the_one_on_record(shop):
    email, key = unique_email("lostrace"), unique_key()
    shop.hooks.on("receipt checkpoint", shop.down(shop.claims))  # the claim never carries it...
    shop.hooks.on("recorded", lambda: (_ for _ in ()).throw(Crash()))  # ...the host dies once Blob has it
    with pytest.raises(Crash):
        shop.call(email, key)
    shop.up()
    shop.clock.now += LEASE + 1

    taken = shop.call(email, key)

    assert taken.status == 200
    assert shop.receipts.read(taken.receipt["receipt_id"]) == taken.outcome.body
    assert len(shop.emails_to(email)) == 1


def test_a_first_attempt_never_reads_brevos_log(shop):
    email = unique_email("nolookup")
    shop.fault("/v3/smtp/emails", 500, email)

    answer = shop.call(email, unique_key())

    pending = requests.get(f"{shop.sandbox_url}/_sandbox/faults", timeout=10).json()
    assert answer.status == 200
    assert [f for f in pending if f["match"] == email and f["path"] == "/v3/smtp/emails"]


@pytest.mark.parametrize("down_for", ["rate and recipient", "cost"])
def test_an_unkeyed_purchase_with_any_counter_down_and_blob_down_sends_nothing(shop, down_for):
    email = unique_email("onecounter")
    shop.blob.set("cut")
    if down_for == "cost":
        shop.hooks.on("cost", shop.down(shop.counters))
    else:
        shop.counters.set("cut")
        shop.hooks.on("cost", lambda: shop.counters.set("pass"))

    refused = shop.call(email)

    assert (refused.status, refused.error["code"]) == (503, "store_unavailable")
    assert shop.emails_to(email) == []


def test_a_rate_limit_not_enforced_stays_degraded_though_the_recipient_counted(shop):
    shop.counters.set("cut")
    shop.hooks.on("recipient", lambda: shop.counters.set("pass"))

    answer = shop.call(unique_email("halfcounted"), unique_key())

    assert answer.status == 200
    assert answer.checks["rate_limit"] == ("degraded", "counter store unreachable; not enforced")
    assert answer.checks["cost_ceiling"][0] == "pass"


def test_unprotected_keys_with_counters_and_blob_down_send_nothing(make_shop):
    shop = make_shop(idempotency_fail_open=True)
    email = unique_email("failopennowhere")
    shop.counters.set("cut")
    shop.blob.set("cut")
    shop.hooks.on("take", shop.down(shop.claims))

    refused = shop.call(email, unique_key())

    assert (refused.status, refused.error["code"]) == (503, "store_unavailable")
    assert refused.checks["idempotency"] == ("degraded", "store unreachable; retries are not protected")
    assert shop.emails_to(email) == []


def test_a_receipt_is_dated_in_utc_on_a_host_in_another_time_zone(shop, monkeypatch):
    monkeypatch.setenv("TZ", "LINT-14")
    time.tzset()
    try:
        answer = shop.call(unique_email("timezone"))
    finally:
        monkeypatch.undo()
        time.tzset()

    assert answer.receipt["issued_at"] == iso(shop.clock.now)
    assert answer.receipt["issued_at"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(shop.clock.now))
