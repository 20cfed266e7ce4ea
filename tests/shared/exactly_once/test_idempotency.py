"""shared.exactly_once.idempotency: the claim state machine of IdempotencyHandler, on the real Azure Table
store and the real Blob receipt store (the session's Azurite), with a fake clock that tests move by
hand.

    (absent) --create--> processing --complete--> completed --expire/reap--> (absent)
                           |   ^  \\--release--> (absent)
                           \\---/  take over after the lease ends (exactly one taker wins)
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from devstack.run import DEV_ACCOUNT_KEY
from shared.config.errors import ReceiptUnavailable, StorageOutage
from shared.config.hashing import Hasher
from shared.exactly_once.idempotency import (
    CARRY_LIMIT,
    COMPLETED,
    MAX_RETRY_AFTER,
    PROCESSING,
    Claimed,
    IdempotencyHandler,
    InProgress,
    Mismatch,
    Replay,
    Vacant,
    carried,
)
from shared.purchase.call import brevo_idempotency_key, token_id
from shared.purchase.receipt.document import encode, new_receipt_id, sha256
from shared.purchase.schema import canonical_request
from shared.seams.claims import Claim, ClaimLost, TableClaimStore
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.storage import container_client, table_client

LEASE = 30
TTL = 300
START = 1_900_000_000.25
HASHER = Hasher("unit-test-secret")
DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)
DEAD_BLOBS = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


class FakeClock:
    """The handler's clock: `now` is what it reads; tests move it instead of sleeping."""

    def __init__(self, now: float = START):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def new_key() -> str:
    return HASHER.idempotency_key(f"key-{uuid.uuid4().hex}")


def fingerprint(email: str = "ada@example.org", **arguments) -> str:
    return HASHER.request(canonical_request({"email": email, **arguments}))


FP = fingerprint()
OTHER_FP = fingerprint("bob@example.org")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def names() -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:12]
    return "idem" + suffix, "rcpt" + suffix


@pytest.fixture
def table(azurite, names):
    client = table_client(azurite, names[0], timeout=5)
    yield client
    client.delete_table()
    client.close()


@pytest.fixture
def container(azurite, names):
    client = container_client(azurite, names[1], timeout=5)
    yield client
    with contextlib.suppress(ResourceNotFoundError):
        client.delete_container()
    client.close()


@pytest.fixture
def store(table) -> TableClaimStore:
    return TableClaimStore(table)


@pytest.fixture
def receipts(container) -> BlobReceiptStore:
    return BlobReceiptStore(container)


@pytest.fixture
def handler(store, receipts, clock) -> IdempotencyHandler:
    return IdempotencyHandler(store, receipts, lease_seconds=LEASE, ttl_seconds=TTL, clock=clock)


@pytest.fixture
def another_instance(azurite, names, clock) -> Callable[[], IdempotencyHandler]:
    """A handler with its own storage clients, as another function instance would have."""
    opened: list = []

    def make() -> IdempotencyHandler:
        table = table_client(azurite, names[0], timeout=5)
        blobs = container_client(azurite, names[1], timeout=5)
        opened.extend((table, blobs))
        return IdempotencyHandler(
            TableClaimStore(table),
            BlobReceiptStore(blobs),
            lease_seconds=LEASE,
            ttl_seconds=TTL,
            clock=clock,
        )

    yield make
    for client in opened:
        client.close()


def claim_step(handler: IdempotencyHandler, key: str, fp: str, receipt_id: str, progress: dict | None = None):
    """`begin`, then `take` at once when the key is vacant: the whole claim step as the flow runs
    it when every guard passes. A lost take reads the key again, as the flow's retry would."""
    begun = handler.begin(key, fp)
    if isinstance(begun, Vacant):
        return handler.take(begun, fp, receipt_id, progress or {}) or handler.begin(key, fp)
    return begun


def claim_new(handler: IdempotencyHandler, key: str | None = None, fp: str = FP) -> Claim:
    begun = claim_step(handler, key or new_key(), fp, new_receipt_id())
    assert isinstance(begun, Claimed) and not begun.resumed, begun
    return begun.claim


def complete_with_receipt(handler: IdempotencyHandler, receipts: BlobReceiptStore, claim: Claim) -> bytes:
    body = encode({"receipt_id": claim.result_id, "status": "fulfilled", "buyer": "Zoë"})
    assert receipts.write(claim.result_id, body)
    handler.complete(claim, body)
    return body


def as_written_before_receipts_rode_on_claims(store: TableClaimStore, key: str) -> Claim:
    """A completed claim as earlier versions wrote it: no receipt bytes on it, only their hash."""
    done = store.get(key)
    return store.update(replace(done, progress={k: v for k, v in done.progress.items() if k != "receipt"}))


def race(handlers: list[IdempotencyHandler], key: str, fp: str = FP) -> list:
    """Run begin on every handler at once (one thread each); returns each outcome or exception."""
    barrier = threading.Barrier(len(handlers))
    outcomes: list = [None] * len(handlers)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = claim_step(handlers[i], key, fp, new_receipt_id())
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            outcomes[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(handlers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    return outcomes


# --- a new key -------------------------------------------------------------------------------------


def test_begin_on_a_new_key_claims_it_with_a_fresh_lease(handler, store, clock):
    key, receipt_id = new_key(), new_receipt_id()

    begun = claim_step(handler, key, FP, receipt_id)

    assert isinstance(begun, Claimed)
    assert begun.resumed is False
    claim = begun.claim
    assert (claim.key_hash, claim.state, claim.fingerprint, claim.result_id) == (
        key,
        PROCESSING,
        FP,
        receipt_id,
    )
    assert claim.locked_until == START + LEASE
    assert claim.expires_at == START + LEASE + TTL
    assert claim.progress == {} and claim.result_sha256 == "" and claim.etag
    assert store.get(key) == claim


# --- while the first request runs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("elapsed", "retry_after"), [(0, 5), (LEASE - 3, 3), (LEASE - 2.5, 3), (LEASE - 0.5, 1)]
)
def test_the_same_request_while_the_lease_holds_is_in_progress(handler, clock, elapsed, retry_after):
    key = new_key()
    claim_new(handler, key)
    clock.advance(elapsed)

    begun = claim_step(handler, key, FP, new_receipt_id())

    assert begun == InProgress(retry_after)
    assert 1 <= begun.retry_after <= MAX_RETRY_AFTER == 5


def test_in_progress_changes_nothing_stored(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    clock.advance(5)

    claim_step(handler, key, FP, new_receipt_id())

    assert store.get(key) == claim


def test_a_different_request_while_processing_is_a_mismatch(handler, store):
    key = new_key()
    claim = claim_new(handler, key)

    assert claim_step(handler, key, OTHER_FP, new_receipt_id()) == Mismatch()
    assert store.get(key) == claim


def test_a_different_request_after_the_lease_ended_is_still_a_mismatch(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    clock.advance(LEASE + 1)

    assert claim_step(handler, key, OTHER_FP, new_receipt_id()) == Mismatch()
    assert store.get(key) == claim


# --- completed -------------------------------------------------------------------------------------


def test_complete_marks_the_claim_completed_with_the_receipt_hash_and_the_ttl(
    handler, store, receipts, clock
):
    claim = claim_new(handler)
    clock.advance(7)
    body = b'{"receipt": "bytes"}'
    receipts.write(claim.result_id, body)

    done = handler.complete(claim, body)

    assert done.state == COMPLETED
    assert done.result_sha256 == sha256(body)
    assert done.locked_until == START + 7
    assert done.expires_at == START + 7 + TTL
    assert (done.result_id, done.fingerprint) == (claim.result_id, claim.fingerprint)
    assert store.get(claim.key_hash) == done


def test_the_same_request_after_completion_replays_the_exact_receipt_bytes(handler, receipts):
    key = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, key))

    begun = claim_step(handler, key, FP, new_receipt_id())

    assert begun == Replay(body)
    assert begun.body == body and "Zoë".encode() in begun.body


def test_a_completed_key_replays_long_after_the_lease_until_its_ttl(handler, receipts, clock):
    key = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, key))
    clock.advance(TTL - 1)

    assert claim_step(handler, key, FP, new_receipt_id()) == Replay(body)


def test_replay_ignores_the_fingerprint_spelling_of_the_same_purchase(handler, receipts):
    key = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, key))

    same = fingerprint("  ADA@example.org ", idempotency_key="ignored-key", bundle_id="agent-starter-kit")

    assert claim_step(handler, key, same, new_receipt_id()) == Replay(body)


def test_a_different_request_after_completion_is_a_mismatch(handler, store, receipts):
    key = new_key()
    complete_with_receipt(handler, receipts, claim_new(handler, key))
    done = store.get(key)

    assert claim_step(handler, key, OTHER_FP, new_receipt_id()) == Mismatch()
    assert store.get(key) == done


def test_a_replay_is_answered_from_the_claim_without_reading_blob(azurite, store, receipts, clock):
    live = IdempotencyHandler(store, receipts, lease_seconds=LEASE, ttl_seconds=TTL, clock=clock)
    key = new_key()
    body = complete_with_receipt(live, receipts, claim_new(live, key))
    dead_blobs = ContainerClient.from_connection_string(
        DEAD_BLOBS, container_name="rcpt" + uuid.uuid4().hex[:12], retry_total=0, connection_timeout=1
    )
    cut_off = IdempotencyHandler(
        store, BlobReceiptStore(dead_blobs), lease_seconds=LEASE, ttl_seconds=TTL, clock=clock
    )

    assert claim_step(cut_off, key, FP, new_receipt_id()) == Replay(body)
    dead_blobs.close()


def test_a_claim_completed_before_receipts_rode_on_it_replays_from_blob(handler, store, receipts):
    key = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, key))
    as_written_before_receipts_rode_on_claims(store, key)

    assert claim_step(handler, key, FP, new_receipt_id()) == Replay(body)


def test_a_receipt_too_large_for_a_table_property_stays_off_the_claim_and_replays_from_blob(
    handler, store, receipts
):
    key = new_key()
    claim = claim_new(handler, key)
    body = encode({"receipt_id": claim.result_id, "note": "é" * 6000})
    assert len(body) < CARRY_LIMIT and len(json.dumps(body.decode())) > 32_768  # escaped, too large
    assert receipts.write(claim.result_id, body)

    handler.complete(claim, body)  # Azure (and Azurite) refuse a string over 32,768 UTF-16 units

    assert "receipt" not in store.get(key).progress
    assert claim_step(handler, key, FP, new_receipt_id()) == Replay(body)


def test_the_largest_receipt_that_rides_on_a_claim_fits_in_the_table(handler, store, receipts):
    key = new_key()
    claim = claim_new(handler, key)
    body = encode({"receipt_id": claim.result_id, "note": "é" * 3980})
    while carried(body + b" "):
        body += b" "
    assert len(json.dumps(body.decode())) == CARRY_LIMIT
    assert receipts.write(claim.result_id, body)

    handler.complete(claim, body)

    assert store.get(key).progress["receipt"].encode() == body
    assert claim_step(handler, key, FP, new_receipt_id()) == Replay(body)


def test_altered_receipt_bytes_are_receipt_unavailable_and_never_claimed(
    handler, store, receipts, container, clock
):
    key = new_key()
    claim = claim_new(handler, key)
    complete_with_receipt(handler, receipts, claim)
    done = as_written_before_receipts_rode_on_claims(store, key)
    container.upload_blob(f"{claim.result_id}.json", b'{"status": "forged"}', overwrite=True)

    for now in (START, START + LEASE + 1, START + TTL - 1):
        clock.now = now
        with pytest.raises(ReceiptUnavailable, match="missing or altered") as caught:
            claim_step(handler, key, FP, new_receipt_id())
        assert caught.value.status == 503

    assert store.get(key) == done


def test_a_missing_receipt_blob_is_receipt_unavailable_and_never_claimed(handler, store, receipts, clock):
    key = new_key()
    claim = claim_new(handler, key)
    receipts.write(new_receipt_id(), b"another receipt, so the container exists")
    handler.complete(claim, b'{"never": "stored"}')
    done = as_written_before_receipts_rode_on_claims(store, key)

    for now in (START, START + LEASE + 1, START + TTL - 1):
        clock.now = now
        with pytest.raises(ReceiptUnavailable, match="missing or altered"):
            claim_step(handler, key, FP, new_receipt_id())

    assert store.get(key) == done


def test_unreachable_receipt_storage_is_receipt_unavailable_with_a_retry_after(
    azurite, store, receipts, clock
):
    live = IdempotencyHandler(store, receipts, lease_seconds=LEASE, ttl_seconds=TTL, clock=clock)
    key = new_key()
    complete_with_receipt(live, receipts, claim_new(live, key))
    as_written_before_receipts_rode_on_claims(store, key)
    dead_blobs = ContainerClient.from_connection_string(
        DEAD_BLOBS, container_name="rcpt" + uuid.uuid4().hex[:12], retry_total=0, connection_timeout=1
    )
    cut_off = IdempotencyHandler(
        store, BlobReceiptStore(dead_blobs), lease_seconds=LEASE, ttl_seconds=TTL, clock=clock
    )

    with pytest.raises(ReceiptUnavailable, match="unreachable") as caught:
        claim_step(cut_off, key, FP, new_receipt_id())

    assert caught.value.retry_after == 5
    assert store.get(key).state == COMPLETED
    dead_blobs.close()


# --- taking over after the lease -------------------------------------------------------------------


def test_after_the_lease_ends_the_same_request_takes_over_keeping_receipt_and_progress(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    progress = {"checks": {"contact_upsert": ["pass", "contact created"]}, "token": {"jti": "j", "iat": 1}}
    held = handler.checkpoint(claim, progress)
    clock.advance(LEASE + 1)

    begun = claim_step(handler, key, FP, new_receipt_id())

    assert isinstance(begun, Claimed) and begun.resumed is True
    taken = begun.claim
    assert taken.result_id == claim.result_id
    assert taken.progress == progress
    assert taken.state == PROCESSING
    assert taken.locked_until == clock.now + LEASE
    assert taken.expires_at == clock.now + LEASE + TTL
    assert taken.etag != held.etag
    assert store.get(key) == taken


def test_the_lease_ends_exactly_at_locked_until(handler, clock):
    key = new_key()
    claim = claim_new(handler, key)
    clock.now = claim.locked_until

    begun = claim_step(handler, key, FP, new_receipt_id())

    assert isinstance(begun, Claimed) and begun.resumed is True


def test_the_old_holder_has_lost_its_claim_after_a_take_over(handler, store, clock):
    key = new_key()
    old = claim_new(handler, key)
    clock.advance(LEASE + 1)
    taken = claim_step(handler, key, FP, new_receipt_id()).claim

    with pytest.raises(ClaimLost):
        handler.checkpoint(old, {"step": "late"})
    with pytest.raises(ClaimLost):
        handler.complete(old, b"late body")

    assert store.get(key) == taken


def test_of_two_takers_with_the_same_etag_exactly_one_wins(handler, store, clock):
    key = new_key()
    claim_new(handler, key)
    clock.advance(LEASE + 1)
    stale = store.get(key)
    renewed = replace(stale, locked_until=clock.now + LEASE, expires_at=clock.now + LEASE + TTL)

    first = store.update(renewed)
    with pytest.raises(ClaimLost):
        store.update(renewed)

    assert store.get(key) == first


def test_ten_instances_taking_over_an_expired_claim_at_once_give_exactly_one_claimed(
    handler, another_instance, store, clock
):
    key = new_key()
    original = claim_new(handler, key)
    handler.checkpoint(original, {"step": 1})
    clock.advance(LEASE + 1)

    outcomes = race([another_instance() for _ in range(10)], key)

    claimed = [o for o in outcomes if isinstance(o, Claimed)]
    assert len(claimed) == 1, outcomes
    assert claimed[0].resumed is True
    assert claimed[0].claim.result_id == original.result_id
    assert all(isinstance(o, InProgress) and 1 <= o.retry_after <= 5 for o in outcomes if o is not claimed[0])
    assert store.get(key) == claimed[0].claim


# --- checkpoint ------------------------------------------------------------------------------------


def test_checkpoint_renews_the_lease_and_stores_the_progress(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    clock.advance(20)
    progress = {
        "checks": {"idempotency": ["pass", "key claimed"]},
        "token": {"jti": "abc", "iat": 1_900_000_000},
    }

    held = handler.checkpoint(claim, progress)

    assert held.locked_until == START + 20 + LEASE
    assert held.expires_at == START + 20 + LEASE + TTL
    assert held.progress == progress
    assert held.etag != claim.etag
    assert store.get(key) == held


def test_a_renewed_lease_keeps_other_requests_out_past_the_first_lease(handler, clock):
    key = new_key()
    claim = claim_new(handler, key)
    clock.advance(LEASE - 5)
    handler.checkpoint(claim, {"step": 1})
    clock.advance(10)

    assert claim_step(handler, key, FP, new_receipt_id()) == InProgress(MAX_RETRY_AFTER)


def test_checkpoint_with_a_stale_claim_raises_claim_lost_and_keeps_the_stored_progress(handler, store):
    key = new_key()
    claim = claim_new(handler, key)
    held = handler.checkpoint(claim, {"step": 1})

    with pytest.raises(ClaimLost):
        handler.checkpoint(claim, {"step": "stale"})

    assert store.get(key) == held


def test_checkpoint_of_a_released_claim_raises_claim_lost(handler, store):
    key = new_key()
    claim = claim_new(handler, key)
    handler.release(claim, keep_progress=False)

    with pytest.raises(ClaimLost):
        handler.checkpoint(claim, {"step": 1})

    assert store.get(key) is None


# --- release ---------------------------------------------------------------------------------------


def test_release_without_progress_deletes_the_claim_so_the_next_begin_is_fresh(handler, store):
    key = new_key()
    claim = claim_new(handler, key)
    held = handler.checkpoint(claim, {"step": 1})

    handler.release(held, keep_progress=False)

    assert store.get(key) is None
    receipt_id = new_receipt_id()
    begun = claim_step(handler, key, FP, receipt_id)
    assert isinstance(begun, Claimed) and begun.resumed is False
    assert begun.claim.result_id == receipt_id != claim.result_id
    assert begun.claim.progress == {}


def test_release_keeping_progress_ends_the_lease_so_the_next_begin_resumes_at_once(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    progress = {"checks": {"fulfillment_email": ["fail", "timed out"]}, "token": {"jti": "j", "iat": 2}}
    held = handler.checkpoint(claim, progress)

    handler.release(held, keep_progress=True)

    stored = store.get(key)
    assert stored.locked_until == clock.now
    assert stored.expires_at == clock.now + TTL
    begun = claim_step(handler, key, FP, new_receipt_id())
    assert isinstance(begun, Claimed) and begun.resumed is True
    assert begun.claim.result_id == claim.result_id
    assert begun.claim.progress == progress


def test_a_released_claim_with_progress_still_refuses_a_different_request(handler):
    key = new_key()
    held = handler.checkpoint(claim_new(handler, key), {"step": 1})

    handler.release(held, keep_progress=True)

    assert claim_step(handler, key, OTHER_FP, new_receipt_id()) == Mismatch()


@pytest.mark.parametrize("keep_progress", [False, True])
def test_release_of_a_lost_claim_is_silent_and_leaves_the_new_holder_alone(
    handler, store, clock, keep_progress
):
    key = new_key()
    old = claim_new(handler, key)
    clock.advance(LEASE + 1)
    taken = claim_step(handler, key, FP, new_receipt_id()).claim

    handler.release(old, keep_progress=keep_progress)

    assert store.get(key) == taken


# --- expiry and reaping ----------------------------------------------------------------------------


@pytest.mark.parametrize("fp", [FP, OTHER_FP], ids=["same-request", "different-request"])
def test_a_completed_key_past_its_ttl_is_claimed_afresh(handler, receipts, clock, fp):
    key = new_key()
    old = claim_new(handler, key)
    complete_with_receipt(handler, receipts, old)
    clock.advance(TTL)
    receipt_id = new_receipt_id()

    begun = claim_step(handler, key, fp, receipt_id)

    assert isinstance(begun, Claimed) and begun.resumed is False
    assert begun.claim.result_id == receipt_id != old.result_id
    assert begun.claim.fingerprint == fp
    assert (begun.claim.state, begun.claim.progress, begun.claim.result_sha256) == (PROCESSING, {}, "")
    assert begun.claim.locked_until == clock.now + LEASE


def test_an_abandoned_processing_key_past_lease_and_ttl_is_claimed_afresh(handler, clock):
    key = new_key()
    old = handler.checkpoint(claim_new(handler, key), {"step": 1})
    clock.advance(LEASE + TTL)
    receipt_id = new_receipt_id()

    begun = claim_step(handler, key, OTHER_FP, receipt_id)

    assert isinstance(begun, Claimed) and begun.resumed is False
    assert begun.claim.result_id == receipt_id != old.result_id
    assert begun.claim.progress == {}


def test_reap_removes_expired_completed_and_abandoned_processing_entries_only(
    handler, store, receipts, clock
):
    done_old = claim_new(handler)  # completed at START: expires START + TTL
    complete_with_receipt(handler, receipts, done_old)
    abandoned = claim_new(handler)  # never renewed: expires START + LEASE + TTL
    clock.advance(100)
    lease_ended = claim_new(handler)  # lease ended at START + 130, expires START + 430
    clock.advance(100)
    running = claim_new(handler)  # begun at START + 200: expires START + 530
    done_recent = claim_new(handler)
    complete_with_receipt(handler, receipts, done_recent)  # expires START + 500

    clock.now = START + TTL - 1
    assert handler.reap() == 0
    clock.now = START + LEASE + TTL + 1
    removed = handler.reap()

    assert removed == 2
    assert store.get(done_old.key_hash) is None
    assert store.get(abandoned.key_hash) is None
    kept = [store.get(c.key_hash) for c in (lease_ended, running, done_recent)]
    assert [c.state for c in kept] == [PROCESSING, PROCESSING, COMPLETED]
    assert receipts.read(done_old.result_id) is not None


def test_reap_on_an_empty_store_is_zero(handler):
    assert handler.reap() == 0


# --- concurrency on a new key ----------------------------------------------------------------------


@pytest.mark.parametrize("table_exists", [True, False], ids=["existing-table", "first-use"])
def test_twenty_concurrent_begins_on_a_new_key_claim_it_exactly_once(
    handler, another_instance, store, table_exists
):
    if table_exists:
        claim_new(handler)
    key = new_key()

    outcomes = race([another_instance() for _ in range(20)], key)

    kinds = Counter(type(o).__name__ for o in outcomes)
    assert kinds == {"Claimed": 1, "InProgress": 19}, outcomes
    [claimed] = [o for o in outcomes if isinstance(o, Claimed)]
    assert claimed.resumed is False
    assert store.get(key) == claimed.claim


# --- the Brevo idempotency key ---------------------------------------------------------------------


def test_the_brevo_idempotency_key_is_a_uuid(handler):
    value = brevo_idempotency_key(claim_new(handler))

    assert str(uuid.UUID(value)) == value
    assert uuid.UUID(value).version == 5


def test_the_brevo_idempotency_key_is_stable_for_the_same_claim(handler, store, clock):
    key = new_key()
    claim = claim_new(handler, key)
    held = handler.checkpoint(claim, {"step": 1})
    clock.advance(LEASE + 1)
    resumed = claim_step(handler, key, FP, new_receipt_id()).claim

    keys = {brevo_idempotency_key(c) for c in (claim, held, store.get(key), resumed)}

    assert keys == {brevo_idempotency_key(claim)}


def test_the_brevo_idempotency_key_differs_for_different_keys(handler):
    receipt_id = new_receipt_id()
    one = claim_new(handler)
    two = replace(one, key_hash=new_key())
    three = replace(one, result_id=receipt_id)

    assert len({brevo_idempotency_key(c) for c in (one, two, three)}) == 3
    assert brevo_idempotency_key(claim_new(handler)) != brevo_idempotency_key(one)


def test_a_key_claimed_afresh_after_its_ttl_gets_a_new_brevo_idempotency_key(handler, receipts, clock):
    key = new_key()
    old = claim_new(handler, key)
    complete_with_receipt(handler, receipts, old)
    clock.advance(TTL)

    fresh = claim_step(handler, key, FP, new_receipt_id()).claim

    assert brevo_idempotency_key(fresh) != brevo_idempotency_key(old)


# --- outages ---------------------------------------------------------------------------------------


def test_begin_raises_store_unavailable_when_the_table_is_unreachable(receipts, clock):
    dead = table_client(DEAD_TABLES, "idem" + uuid.uuid4().hex[:12], timeout=1)
    handler = IdempotencyHandler(
        TableClaimStore(dead), receipts, lease_seconds=LEASE, ttl_seconds=TTL, clock=clock
    )

    with pytest.raises(StorageOutage):
        claim_step(handler, new_key(), FP, new_receipt_id())
    dead.close()


def test_release_is_silent_when_the_table_is_unreachable(handler, receipts, clock):
    claim = claim_new(handler)
    dead = table_client(DEAD_TABLES, "idem" + uuid.uuid4().hex[:12], timeout=1)
    cut_off = IdempotencyHandler(
        TableClaimStore(dead), receipts, lease_seconds=LEASE, ttl_seconds=TTL, clock=clock
    )

    cut_off.release(claim, keep_progress=True)
    cut_off.release(claim, keep_progress=False)
    dead.close()


def test_the_download_token_id_derives_from_the_claim_alone(handler, clock):
    begun = claim_step(handler, "a" * 64, "fp", new_receipt_id())
    other = claim_step(handler, "b" * 64, "fp", new_receipt_id())

    claim = begun.claim
    assert claim.created_at == clock.now
    assert token_id(claim) == token_id(replace(claim, progress={"x": 1}, etag="other"))
    assert token_id(claim) != token_id(other.claim)
    assert len(token_id(claim)) == 22


# --- claims written before keys were scoped to the buyer --------------------------------------------


def test_a_claim_written_before_scoping_still_replays_for_its_own_request(handler, receipts):
    legacy = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, legacy))

    assert handler.begin(new_key(), FP, legacy_hash=legacy) == Replay(body)


def test_a_claim_written_before_scoping_tells_a_stranger_nothing(handler, receipts):
    legacy, scoped = new_key(), new_key()
    complete_with_receipt(handler, receipts, claim_new(handler, legacy))
    running = new_key()
    claim_new(handler, running)

    assert handler.begin(scoped, OTHER_FP, legacy_hash=legacy) == Vacant(scoped)
    assert handler.begin(scoped, OTHER_FP, legacy_hash=running) == Vacant(scoped)


def test_a_store_that_starts_without_claims_never_looks_for_one_from_before_scoping(handler, store, receipts):
    key = new_key()
    assert handler.begin(key, FP, legacy_hash=new_key()) == Vacant(key)  # the first look: no claims
    legacy = new_key()  # say a draining instance of the old version wrote one after that
    complete_with_receipt(handler, receipts, claim_new(handler, legacy))

    assert handler.begin(key, FP, legacy_hash=legacy) == Vacant(key)
    assert store.scoping_horizon(START + 1, 10.0) == 0.0


def test_claims_from_before_scoping_are_looked_for_until_twice_a_claims_lifetime_after_the_first_look(
    handler, store, receipts, clock, another_instance
):
    legacy = new_key()
    body = complete_with_receipt(handler, receipts, claim_new(handler, legacy))
    store.update(replace(store.get(legacy), expires_at=START + 10 * (TTL + LEASE)))  # kept alive

    assert handler.begin(new_key(), FP, legacy_hash=legacy) == Replay(body)  # the first look
    clock.advance(2 * (TTL + LEASE) - 1)
    assert another_instance().begin(new_key(), FP, legacy_hash=legacy) == Replay(body)
    clock.advance(1)
    key = new_key()
    assert handler.begin(key, FP, legacy_hash=legacy) == Vacant(key)
    assert another_instance().begin(key, FP, legacy_hash=legacy) == Vacant(key)
    assert store.scoping_horizon(clock.now, 10.0) == START + 2 * (TTL + LEASE)


def test_a_take_whose_insert_landed_unseen_recognises_its_own_claim(handler, store):
    key, receipt_id = new_key(), new_receipt_id()
    vacant = handler.begin(key, FP)
    landed = handler.take(vacant, FP, receipt_id, {})

    again = handler.take(vacant, FP, receipt_id, {})
    other = handler.take(vacant, FP, new_receipt_id(), {})

    assert isinstance(again, Claimed) and again.claim.result_id == receipt_id
    assert again.claim.etag == landed.claim.etag
    assert other is None
