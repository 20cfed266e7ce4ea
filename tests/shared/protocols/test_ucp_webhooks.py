"""Order events over real Azure Table storage (the session's Azurite) to a platform's receiver on
127.0.0.1: retried with backoff until the platform answers 2xx, with the same Webhook-Id each
time; given up after a day; never sent for a checkout that did not complete; one instance at a
time."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.config.sealing import Sealer
from shared.protocols.ucp.checkout import Line, Session
from shared.protocols.ucp.orders import order_id
from shared.protocols.ucp.session_rows import SessionRows
from shared.protocols.ucp.webhooks import BACKOFF_SECONDS, GIVE_UP_SECONDS, SHARDS, Webhooks, shard_of
from shared.purchase.catalog import find_bundle
from shared.seams.checkout_store import PURPOSE, CheckoutStore, Row
from shared.seams.public_fetch import PublicFetcher
from shared.seams.storage import table_client
from tests.support import StoppedClock, new_ec_key, private_pem
from tests.ucp_platform import Platform, verify_store_signature, webhook_message

KEYS = KeySet.load(private_pem(new_ec_key()))
PLATFORM_ID = Hasher("unit-test-secret").platform("https://platform.example/profile")


@pytest.fixture
def clock() -> StoppedClock:
    return StoppedClock(time.time())  # now: the events' signatures are checked against real time


@pytest.fixture
def store(azurite) -> CheckoutStore:
    return CheckoutStore(
        table_client(azurite, f"ucp{uuid.uuid4().hex[:10]}", 5), Sealer("unit-test-secret", PURPOSE)
    )


def queued(store: CheckoutStore) -> list[Row]:
    """Every queued event, in whichever shard."""
    return [row for shard in range(SHARDS) for row in store.rows(f"~webhooks-{shard}")]


def webhooks_on(store: CheckoutStore, clock: StoppedClock) -> Webhooks:
    fetcher = PublicFetcher(local=True, timeout=3.0, max_bytes=64 * 1024)
    return Webhooks(store, fetcher, lambda: KEYS, "https://shop.example/.well-known/ucp", clock)


def session(store: CheckoutStore, clock: StoppedClock, status: str = "completed") -> Session:
    checkout_id = "chk_" + uuid.uuid4().hex[:26].translate(str.maketrans("0189", "abcd"))
    order = {
        "id": order_id(checkout_id),
        "label": "rcpt_x",
        "permalink_url": "https://shop.example/api/receipts/rcpt_x",
    }
    made = Session(
        checkout_id,
        PLATFORM_ID,
        status,
        [Line(find_bundle("agent-starter-kit"))],
        {"email": "a@example.org"},
        clock(),
        clock() + 3600,
        order,
    )
    assert SessionRows(store, clock).insert(made)
    return made


def test_a_refused_event_is_retried_with_backoff_and_the_same_webhook_id_until_it_lands(store, clock):
    platform = Platform(500, 503)
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        first = webhooks.send(made.id)
        clock.now += BACKOFF_SECONDS[0] - 1
        early = webhooks.deliver_due()
        clock.now += 1
        second = webhooks.deliver_due()
        clock.now += BACKOFF_SECONDS[1]
        third = webhooks.deliver_due()
        clock.now += 3600
        after = webhooks.deliver_due()
    finally:
        platform.close()

    assert (first, early, second, third, after) == (False, 0, 0, 1, 0)
    assert len(platform.received) == 3
    assert len({event["headers"]["Webhook-Id"] for event in platform.received}) == 1
    stamps = [int(event["headers"]["Webhook-Timestamp"]) for event in platform.received]
    assert stamps[1] - stamps[0] == BACKOFF_SECONDS[0] and stamps[2] > stamps[1], "each attempt's own time"
    first_event, last = platform.received[0], platform.received[-1]  # the first signed at real time
    assert json.loads(last["body"])["id"] == order_id(made.id) and last["body"] == first_event["body"]
    message = webhook_message(platform.webhook_url, first_event["headers"])
    verify_store_signature(message, KEYS.public_keys[0], first_event["body"])


def test_an_event_no_platform_takes_for_a_day_is_given_up(store, clock):
    platform = Platform(*([500] * 100))
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        start = clock.now
        while clock.now < start + GIVE_UP_SECONDS + 7200:
            webhooks.deliver_due()
            clock.now += 3600
        tried = len(platform.received)
        clock.now += 3600
        webhooks.deliver_due()
    finally:
        platform.close()

    assert 20 < tried < 40
    assert len(platform.received) == tried, "given up: no more attempts"
    assert queued(store) == []


@pytest.mark.parametrize("status", ["incomplete", "ready_for_complete", "canceled"])
def test_no_event_is_sent_for_a_checkout_whose_complete_did_not_happen(store, clock, status):
    """A canceled checkout's event is dropped; one whose complete failed waits for another
    complete of the same checkout, which finds its event already queued."""
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock, status)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        webhooks.deliver_due()
    finally:
        platform.close()

    assert platform.received == []
    assert len(queued(store)) == (0 if status == "canceled" else 1)


def test_a_checkout_still_completing_keeps_its_event_for_later(store, clock):
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock, "complete_in_progress")
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        waits = []
        for _ in range(3):
            webhooks.deliver_due()
            [row] = queued(store)
            waits.append(row.due - clock())
            clock.now = row.due
    finally:
        platform.close()

    assert platform.received == []
    assert len(queued(store)) == 1
    assert waits == list(BACKOFF_SECONDS[:3]), "re-checked less often each time, not every 30 s"


def test_an_event_another_instance_has_taken_is_not_sent_twice(store, clock):
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        [row] = queued(store)
        webhooks.send(made.id)  # takes the row, delivers, deletes it
        other = Webhooks(
            store, PublicFetcher(local=True, timeout=3.0, max_bytes=1024), lambda: KEYS, "x", clock
        )
        late = other._attempt(row)  # an instance that read the row before it was taken
    finally:
        platform.close()

    assert late is False
    assert len(platform.received) == 1


def test_a_complete_never_sends_an_event_the_timer_is_sending(store, clock):
    """The timer leased the row (its due moved past now) just before the complete's own send
    read it afresh: the send must leave it to the lease holder."""
    from dataclasses import replace

    from shared.protocols.ucp.webhooks import LEASE_SECONDS

    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        [row] = queued(store)
        store.replace(replace(row, due=clock() + LEASE_SECONDS))  # the timer's lease
        sent = webhooks.send(made.id)
    finally:
        platform.close()

    assert sent is False
    assert platform.received == []
    assert len(queued(store)) == 1, "the lease holder still has it"


def test_an_event_to_a_private_address_is_never_sent_on_azure(store, clock):
    platform = Platform()
    fetcher = PublicFetcher(local=False, timeout=3.0, max_bytes=64 * 1024)
    webhooks = Webhooks(store, fetcher, lambda: KEYS, "https://shop.example/.well-known/ucp", clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url.replace("http://", "https://"))
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        sent = webhooks.send(made.id)
    finally:
        platform.close()

    assert sent is False and platform.received == []


def test_events_backing_off_never_crowd_out_one_that_is_due(store, clock):
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        for index in range(60):  # a dead webhook's backlog, every event waiting an hour, in its shard
            row = Row(
                shard_of(order_id(made.id)),
                f"ord_{index:04d}",
                {"url": "http://127.0.0.1:9/x"},
                clock() + 86400,
                due=clock() + 3600,
            )
            store.create(row)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        delivered = webhooks.deliver_due()
    finally:
        platform.close()

    assert delivered == 1 and len(platform.received) == 1


def test_an_event_that_cannot_be_signed_or_sent_never_stops_the_others(store, clock):
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    try:
        bad, good = session(store, clock), session(store, clock)
        poisoned = {
            "url": "https://h/\u00e9",
            "platform": PLATFORM_ID,
            "checkout": bad.id,
            "event": "e",
            "first_at": clock(),
        }
        store.create(
            Row(shard_of("ord_0000"), "ord_0000", {**poisoned, "attempts": 0}, clock() + 86400, due=clock())
        )
        webhooks.queue(PLATFORM_ID, good.id, platform.webhook_url)
        webhooks.queue(PLATFORM_ID, bad.id, "not a url")  # refused at the door: not queued
        delivered = webhooks.deliver_due()
    finally:
        platform.close()

    assert delivered == 1 and len(platform.received) == 1
    [left] = queued(store)
    assert left.kind == "ord_0000" and left.due > clock(), "the bad one backs off like any failure"


def test_an_event_or_a_checkout_that_cannot_be_read_never_stops_the_others(store, clock):
    """Rows sealed under another secret (another version's, mid-deployment): the shard holding an
    unreadable event, and an event whose checkout is unreadable, are passed by; the rest go out."""
    platform = Platform()
    webhooks = webhooks_on(store, clock)
    foreign = CheckoutStore(store._table, Sealer("another-secret", PURPOSE))
    try:
        good = session(store, clock)
        webhooks.queue(PLATFORM_ID, good.id, platform.webhook_url)
        elsewhere = next(
            f"ord_{k:04d}" for k in range(99) if shard_of(f"ord_{k:04d}") != shard_of(order_id(good.id))
        )
        record = {"url": platform.webhook_url, "platform": PLATFORM_ID, "checkout": "chk_x", "event": "e"}
        foreign.create(Row(shard_of(elsewhere), elsewhere, record, clock() + 60))  # an unreadable event
        unreadable = session(foreign, clock)  # its checkout sealed under the other secret
        webhooks.queue(PLATFORM_ID, unreadable.id, platform.webhook_url)
        delivered = webhooks.deliver_due()
    finally:
        platform.close()

    assert delivered == 1
    assert [json.loads(r["body"])["id"] for r in platform.received] == [order_id(good.id)]


def test_an_event_a_platform_takes_with_a_long_answer_is_delivered_once(store, clock):
    """Only the status counts: a 2xx with a body past the fetcher's bound is still a delivery."""
    platform = Platform()
    platform.padding = 100 * 1024  # past the 64 KiB webhooks_on reads at most
    webhooks = webhooks_on(store, clock)
    try:
        made = session(store, clock)
        webhooks.queue(PLATFORM_ID, made.id, platform.webhook_url)
        sent = webhooks.send(made.id)
        clock.now += BACKOFF_SECONDS[-1]
        webhooks.deliver_due()
    finally:
        platform.close()

    assert sent is True
    assert len(platform.received) == 1
    assert queued(store) == []
