"""Storage outages and crashes at every step of the purchase flow, and the promises that survive
them: (A) a receipt answered 200 is on record, byte for byte, at its URL and in the ledger, at
once or after the repair timer; (B) every 200 for one key carries the same bytes; (C) a purchase
is counted once; (D) a key never runs unprotected; and one email per key.

The flow runs in process on the real Azure SDK clients, whose Table, Blob and Queue traffic goes
through real TCP fault proxies in front of the session's Azurite (`devstack.faultproxy`). A trip wire on the
flow's own collaborators says *when*: it switches a proxy, or kills the attempt as a host crash
would (a BaseException the flow cannot catch, so nothing is released or recorded).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from decimal import Decimal

import pytest
import requests
from azure.storage.blob import ContainerClient

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.exactly_once.idempotency import IdempotencyHandler
from shared.purchase.call import Caller, PurchaseCall, StoreConfig, scoped_key_hash
from shared.purchase.governance import Governance, Limits
from shared.purchase.storefront import Storefront
from shared.seams.brevo import BrevoClient
from shared.seams.claims import TableClaimStore
from shared.seams.contact_queue import ContactQueue
from shared.seams.counters import TableCounters
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import container_client, table_client
from tests.support import new_ec_key, own_queue, private_pem, unique_email, unique_key

KEYS = KeySet.load(private_pem(new_ec_key()))
LEASE = 60
STEPS = (
    "before_claim",
    "after_queued",
    "brevo_holds_send",
    "after_email",
    "blob_write",
    "ledger_write",
    "completion",
)
STORES = ("table", "blob", "both")


class Crash(BaseException):
    """The host dies here: no except clause of the flow sees it."""


class Clock:
    def __init__(self) -> None:
        self.now = 1_900_000_000.0

    def __call__(self) -> float:
        return self.now


class TripWire:
    """Actions to run once each, when the flow reaches their step."""

    def __init__(self) -> None:
        self._actions: dict[str, object] = {}

    def on(self, step: str, action) -> None:
        self._actions[step] = action

    def at(self, step: str) -> None:
        action = self._actions.pop(step, None)
        if action is not None:
            action()


class WiredQueue:
    """The contact queue; its step is the buyer being on it, before anything is sent."""

    def __init__(self, queue: ContactQueue, wire: TripWire):
        self.queue, self.wire = queue, wire

    def enqueue(self, email: str, name: str) -> None:
        self.queue.enqueue(email, name)
        self.wire.at("after_queued")

    def __getattr__(self, name: str):
        return getattr(self.queue, name)


class WiredBrevo(BrevoClient):
    wire: TripWire

    def send_email(self, email, idempotency_key=None):
        self.wire.at("brevo_holds_send")
        message_id = super().send_email(email, idempotency_key)
        self.wire.at("after_email")
        return message_id


class WiredReceipts(BlobReceiptStore):
    wire: TripWire

    def write(self, receipt_id: str, body: bytes, *, ledger_day: str | None = None) -> bool:
        self.wire.at("blob_write")
        return super().write(receipt_id, body, ledger_day=ledger_day)


class WiredLedger(TableLedger):
    wire: TripWire

    def add(self, receipt: dict) -> None:
        self.wire.at("ledger_write")
        super().add(receipt)
        self.wire.at("after_ledger")


class WiredHandler(IdempotencyHandler):
    wire: TripWire

    def take(self, vacant, fingerprint, receipt_id, progress):
        self.wire.at("claim_insert")
        return super().take(vacant, fingerprint, receipt_id, progress)

    def checkpoint(self, claim, progress):
        if "receipt" in progress:
            self.wire.at("receipt_checkpoint")
        return super().checkpoint(claim, progress)

    def complete(self, claim, body, *, not_after=None):
        self.wire.at("completion")
        return super().complete(claim, body, not_after=not_after)

    def _legacy_alive(self, now):
        self.wire.at("scoping_look")  # the instance's first (or uncached) read of the horizon
        return super()._legacy_alive(now)


class WiredRepairs(RepairQueue):
    wire: TripWire

    def queued(self, receipt_id: str) -> bytes | None:
        self.wire.at("repair_lookup")
        return super().queued(receipt_id)


@dataclass
class Shop:
    storefront: Storefront
    table: FaultProxy
    blob: FaultProxy
    queue: FaultProxy  # the contact queue
    wire: TripWire
    clock: Clock
    receipts: BlobReceiptStore  # straight to Azurite, for the checks
    ledger: TableLedger
    governance: Governance
    sandbox_url: str
    claims: TableClaimStore  # straight to Azurite, for the checks
    container: ContainerClient  # the receipts container, straight to Azurite

    def receipt_ids(self) -> list[str]:
        if not self.container.exists():
            return []
        return [b.name.removesuffix(".json") for b in self.container.list_blobs() if b.name.endswith(".json")]

    def buy(self, email: str, key: str | None) -> tuple[int, bytes]:
        arguments = {"email": email, **({"idempotency_key": key} if key else {})}
        outcome = self.storefront.purchase(PurchaseCall(arguments, None, "198.51.100.7", Caller("http")))
        return outcome.status, outcome.body

    def down(self, stores: str, mode: str = "cut") -> None:
        for proxy in self.proxies(stores):
            proxy.set(mode)

    def up(self) -> None:
        self.table.set("pass")
        self.blob.set("pass")
        self.queue.set("pass")

    def proxies(self, stores: str) -> list[FaultProxy]:
        return {"table": [self.table], "blob": [self.blob], "both": [self.table, self.blob]}[stores]

    def emails_to(self, email: str) -> list[dict]:
        return requests.get(f"{self.sandbox_url}/_sandbox/emails", params={"to": email}, timeout=10).json()

    def listed(self, receipt: dict) -> list[str]:
        listing = self.ledger.day(receipt["issued_at"][:10], page_size=200)
        return [entry.receipt_id for entry in listing.receipts]


DEFAULT_LIMITS = Limits(100, Decimal("5"), Decimal("0.01"), recipient_limit_per_day=100)


@pytest.fixture
def make_shop(azurite, sandbox):
    proxies: list[FaultProxy] = []

    def make(limits: Limits = DEFAULT_LIMITS, patience: float = 0.3, token_ttl: int = 7 * 86400) -> Shop:
        table = FaultProxy(endpoint_port(azurite, "Table")).start()
        blob = FaultProxy(endpoint_port(azurite, "Blob")).start()
        queue = FaultProxy(endpoint_port(azurite, "Queue")).start()
        proxies.extend((table, blob, queue))
        through = proxied(azurite, blob=blob, table=table)
        suffix = uuid.uuid4().hex[:10]
        clock, wire, hasher = Clock(), TripWire(), Hasher("unit-test-secret")
        idem, gov, ledger_name, rcpt = (f"{n}{suffix}" for n in ("idem", "gov", "ledger", "rcpt"))
        receipts = WiredReceipts(container_client(through, rcpt, 1))
        ledger = WiredLedger(table_client(through, ledger_name, 1))
        handler = WiredHandler(
            TableClaimStore(table_client(through, idem, 1)),
            receipts,
            lease_seconds=LEASE,
            ttl_seconds=3600,
            clock=clock,
        )
        brevo = WiredBrevo(requests.Session(), f"{sandbox.url}/v3", "unit-test-key", 5)
        repairs = WiredRepairs(table_client(through, ledger_name, 1))
        for wired in (receipts, ledger, handler, brevo, repairs):
            wired.wire = wire
        config = StoreConfig(
            "http://localhost:7071",
            "store@example.com",
            "Storefront",
            download_token_ttl_seconds=token_ttl,
            record_patience_seconds=patience,
        )
        storefront = Storefront(
            config,
            hasher=hasher,
            idempotency=handler,
            governance=Governance(TableCounters(table_client(through, gov, 1)), hasher, limits, clock=clock),
            receipts=receipts,
            brevo=brevo,
            keys=lambda: KEYS,
            ledger=ledger,
            repairs=repairs,
            contacts=WiredQueue(own_queue(proxied(azurite, queue=queue)), wire),
            clock=clock,
        )
        return Shop(
            storefront,
            table,
            blob,
            queue,
            wire,
            clock,
            BlobReceiptStore(container_client(azurite, rcpt, 5)),
            TableLedger(table_client(azurite, ledger_name, 5)),
            Governance(TableCounters(table_client(azurite, gov, 5)), hasher, limits, clock=clock),
            sandbox.url,
            TableClaimStore(table_client(azurite, idem, 5)),
            container_client(azurite, rcpt, 5),
        )

    yield make
    for proxy in proxies:
        proxy.stop()


@pytest.fixture
def shop(make_shop) -> Shop:
    return make_shop()


def wired_step(step: str, keyed: bool) -> str:
    """Without a key there is no claim to complete: its last step is the ledger row."""
    return "after_ledger" if step == "completion" and not keyed else step


def recover(shop: Shop, email: str, key: str | None, first: tuple[int, bytes]) -> list[tuple[int, bytes]]:
    """Stores back; a keyed agent retries (past a dead holder's lease when told 409) until 200,
    then once more; the repair timer runs."""
    shop.up()
    answers = [first]
    if key:
        for _ in range(6):
            status, _ = answers[-1]
            if status == 200 and len(answers) > 1:
                break
            if status == 409:
                shop.clock.now += LEASE + 1
            answers.append(shop.buy(email, key))
    shop.storefront.repair_receipts()
    return answers


def assert_promises(
    shop: Shop, email: str, key: str | None, answers: list[tuple[int, bytes]], earlier: int = 0
) -> None:
    """`earlier`: purchases this client made before, already counted."""
    fulfilled = [body for status, body in answers if status == 200]
    assert all(status in (200, 409, 503) for status, _ in answers), [s for s, _ in answers]
    assert len(shop.emails_to(email)) == (1 if fulfilled else 0), "one email per purchase, none unanswered"
    if key:
        assert answers[-1][0] == 200, "a keyed purchase is never stuck once the stores are back"
        assert len(set(fulfilled)) == 1, "every 200 for one key carries the same bytes"
    for body in set(fulfilled):
        receipt = json.loads(body)
        assert shop.receipts.read(receipt["receipt_id"]) == body, "on record at its receipt_url"
        assert shop.listed(receipt).count(receipt["receipt_id"]) == 1, "listed once in the ledger"
    enforced = [json.loads(body)["checks"][2]["result"] == "pass" for body in set(fulfilled)]
    counted = shop.governance.reserve_rate("198.51.100.7").count - 1 - earlier
    assert counted == sum(enforced), "a purchase is counted once (none while the counters were down)"


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
@pytest.mark.parametrize("stores", STORES)
@pytest.mark.parametrize("step", STEPS)
def test_an_outage_from_any_step_until_the_answer_keeps_every_promise(shop, step, stores, keyed, caplog):
    email, key = unique_email("outage"), unique_key() if keyed else None
    shop.wire.on(wired_step(step, keyed), lambda: shop.down(stores))
    if step == "before_claim":
        shop.wire.at(step)

    first = shop.buy(email, key)

    if keyed and step == "before_claim" and stores != "blob":
        assert first[0] == 503 and shop.emails_to(email) == [], "D: a key never runs unprotected"
    if not keyed and step == "before_claim" and stores == "both":
        assert first[0] == 503 and shop.emails_to(email) == [], "nothing sent that could not be recorded"
    if not keyed and stores == "both" and first[0] == 200 and "not on record" in caplog.text:
        # Both stores gone between the email and its receipt: the one documented case where an
        # unkeyed receipt cannot be (wholly) on record; the caller holds it, and the log says so.
        assert len(shop.emails_to(email)) == 1
        return
    assert_promises(shop, email, key, recover(shop, email, key, first))


@pytest.mark.parametrize("keyed", [True, False], ids=["key", "no-key"])
@pytest.mark.parametrize("step", (*STEPS[1:], "after_ledger"))
def test_a_host_crash_at_any_step_keeps_every_promise(shop, step, keyed):
    email, key = unique_email("crash"), unique_key() if keyed else None

    def crash() -> None:
        raise Crash(step)

    shop.wire.on(wired_step(step, keyed), crash)
    with pytest.raises(Crash):
        shop.buy(email, key)

    if keyed:
        answers = recover(shop, email, key, shop.buy(email, key))
        assert answers[0][0] == 409, "the dead holder's lease still runs"
        assert_promises(shop, email, key, answers)
    else:
        shop.storefront.repair_receipts()
        assert len(shop.emails_to(email)) <= 1
        for receipt_id in shop.receipt_ids():  # issued, never answered: still on the books
            receipt = json.loads(shop.receipts.read(receipt_id))
            assert shop.listed(receipt) == [receipt_id]


def test_a_one_second_blip_of_both_stores_while_brevo_holds_the_send_gives_one_receipt(make_shop, sandbox):
    """The reported case: receipt A answered but never stored, 409 for the lease, then receipt B."""
    shop = make_shop(patience=5)
    email, key = unique_email("blip"), unique_key()
    shop.wire.on("brevo_holds_send", lambda: [p.set("cut", seconds=1.0) for p in (shop.table, shop.blob)])
    requests.post(
        f"{sandbox.url}/_sandbox/faults",
        json={"path": "/v3/smtp/email", "status": 0, "match": email, "delay_seconds": 0.5},
        timeout=10,
    ).raise_for_status()

    first = shop.buy(email, key)

    assert first[0] == 200, first[1][:300]
    assert_promises(shop, email, key, recover(shop, email, key, first))


def test_a_crash_after_the_buyer_is_queued_is_409_then_200_never_429(make_shop):
    """C: the buyer was at its last allowed purchase when the host died mid-purchase."""
    shop = make_shop(Limits(2, Decimal("5"), Decimal("0.01"), recipient_limit_per_day=100))
    assert shop.buy(unique_email("earlier"), None)[0] == 200
    email, key = unique_email("crash"), unique_key()

    def crash() -> None:
        raise Crash("queued")

    shop.wire.on("after_queued", crash)
    with pytest.raises(Crash):
        shop.buy(email, key)

    during_lease = shop.buy(email, key)
    shop.clock.now += LEASE + 1
    after_lease = shop.buy(email, key)

    assert during_lease[0] == 409
    assert after_lease[0] == 200, after_lease[1][:400]
    assert len(shop.emails_to(email)) == 1


@pytest.mark.parametrize("status", [429, 422, 503])
def test_a_refusal_with_a_key_says_what_a_retry_with_it_will_do(make_shop, status):
    ceiling = Decimal("0") if status == 429 else Decimal("5")
    shop = make_shop(Limits(100, ceiling, Decimal("0.01"), recipient_limit_per_day=100))
    email, key = unique_email("refusal"), unique_key()
    if status == 503:
        shop.queue.set("cut")  # the buyer cannot be queued to become a contact: nothing is sent
    if status == 422:
        email = "not-an-address"

    refused = shop.buy(email, key)
    idempotency = json.loads(refused[1])["checks"][0]

    assert refused[0] == status
    if status == 503:
        assert json.loads(refused[1])["error"]["message"].startswith("the buyer could not be queued")
    assert idempotency == {
        "name": "idempotency",
        "result": "pass",
        "detail": "key not used: nothing was sent, so a retry with it runs the purchase again",
    }


def test_a_claim_insert_whose_answer_is_lost_is_counted_once(shop):
    """The insert lands but its answer never comes back: the claim, and the reservations it
    records, exist, so they stay counted; the retry waits for the lease, then resumes."""
    assert shop.buy(unique_email("first"), unique_key())[0] == 200  # the claims table exists
    email, key = unique_email("late"), unique_key()
    shop.wire.on("claim_insert", lambda: shop.table.set("mute"))

    first = shop.buy(email, key)
    answers = recover(shop, email, key, first)

    assert first[0] == 503
    assert "nothing was sent" in json.loads(first[1])["checks"][0]["detail"]
    assert answers[1][0] == 409, "the claim that landed holds the key until its lease ends"
    assert_promises(shop, email, key, answers, earlier=1)


def test_a_taker_that_cannot_look_up_a_queued_receipt_never_issues_a_second_one(shop):
    """Blips at three moments: the recovery point with the receipt, Blob at the write (the
    receipt is queued for repair and answered), the claim's completion; then the taker's look
    at the repair queue fails too."""
    email, key = unique_email("queued"), unique_key()

    def table_blip(until: str):
        shop.table.set("cut")
        shop.wire.on(until, lambda: shop.table.set("pass"))

    shop.wire.on("receipt_checkpoint", lambda: table_blip("blob_write"))
    shop.wire.on("blob_write", lambda: shop.blob.set("cut"))
    shop.wire.on("completion", lambda: shop.table.set("cut"))
    first = shop.buy(email, key)
    shop.up()
    shop.clock.now += LEASE + 1
    shop.wire.on("repair_lookup", lambda: shop.table.set("cut"))

    taker = shop.buy(email, key)
    answers = recover(shop, email, key, taker)

    assert first[0] == 200 and taker[0] == 503
    assert_promises(shop, email, key, [first, *answers])


def test_a_taker_that_fails_before_its_own_send_keeps_the_claim_for_the_next(shop):
    """The dead holder's email went out, but none of its recovery points landed; the taker then
    fails to queue the buyer (the contact queue is down) before reaching the send. Deleting the
    claim would let the next retry start afresh and send a second email."""
    email, key = unique_email("taker"), unique_key()
    shop.wire.on("after_queued", lambda: shop.table.set("cut"))

    def crash() -> None:
        raise Crash("blob_write")

    shop.wire.on("blob_write", crash)
    with pytest.raises(Crash):
        shop.buy(email, key)
    shop.up()
    shop.clock.now += LEASE + 1
    shop.queue.set("cut")

    failed = shop.buy(email, key)
    answers = recover(shop, email, key, shop.buy(email, key))

    assert failed[0] == 503
    assert json.loads(failed[1])["error"]["message"].startswith("the buyer could not be queued")
    assert "resumes and sends no second email" in json.loads(failed[1])["checks"][0]["detail"]
    assert_promises(shop, email, key, answers)


def test_a_taker_that_resumes_with_the_receipt_alone_caps_the_replay_at_the_tokens_expiry(make_shop):
    """The taker mints no token (the receipt is on the claim), yet a replay must not outlive the
    emailed link: the expiry derives from the claim."""
    shop = make_shop(token_ttl=120)
    email, key = unique_email("cap"), unique_key()
    created = shop.clock.now

    def crash() -> None:
        raise Crash("blob_write")

    shop.wire.on("blob_write", crash)
    with pytest.raises(Crash):
        shop.buy(email, key)
    shop.clock.now += LEASE + 1
    finished = shop.buy(email, key)

    claim = shop.claims.get(scoped_key_hash(Hasher("unit-test-secret"), key, email))
    assert finished[0] == 200 and claim.state == "completed"
    assert claim.expires_at == int(created) + 120


def test_a_receipt_queued_while_blob_is_down_is_served_at_once_and_a_store_that_cannot_say_is_503(shop):
    email, key = unique_email("served"), unique_key()
    shop.wire.on("blob_write", lambda: shop.blob.set("cut"))
    answer = shop.buy(email, key)
    receipt_id = json.loads(answer[1])["receipt_id"]

    served_while_blob_down = shop.storefront.stored_receipt(receipt_id)
    shop.blob.set("pass")
    shop.table.set("cut")
    with pytest.raises(StorageOutage):
        shop.storefront.stored_receipt(receipt_id)  # not in Blob yet, and the queue cannot say
    shop.table.set("pass")

    assert answer[0] == 200
    assert served_while_blob_down == answer[1]
    assert shop.storefront.stored_receipt(receipt_id) == answer[1]


def test_a_repair_run_during_an_outage_fails_and_the_next_run_finishes_the_job(shop):
    email, key = unique_email("repair"), unique_key()
    shop.wire.on("blob_write", lambda: shop.blob.set("cut"))
    answer = shop.buy(email, key)
    receipt = json.loads(answer[1])

    with pytest.raises(StorageOutage):
        shop.storefront.repair_receipts()  # Blob still down: the queued receipt stays queued
    shop.blob.set("pass")
    shop.table.set("cut")
    with pytest.raises(StorageOutage):
        shop.storefront.repair_receipts()  # now the Table is down
    shop.table.set("pass")
    repaired = shop.storefront.repair_receipts()
    again = shop.storefront.repair_receipts()

    assert answer[0] == 200
    assert repaired >= 1 and again == 0
    assert shop.receipts.read(receipt["receipt_id"]) == answer[1]
    assert shop.listed(receipt) == [receipt["receipt_id"]]


@pytest.mark.parametrize("mode", ["cut", "stall"])
def test_a_table_that_fails_at_the_first_look_for_pre_scoping_claims_sends_nothing(shop, mode):
    email, key = unique_email("horizon"), unique_key()
    shop.wire.on("scoping_look", lambda: shop.down("table", mode))

    first = shop.buy(email, key)
    shop.up()
    again = shop.buy(email, key)

    assert first[0] == 503 and json.loads(first[1])["error"]["code"] == "store_unavailable"
    assert again[0] == 200
    assert len(shop.emails_to(email)) == 1
