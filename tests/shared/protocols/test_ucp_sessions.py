"""Checkout sessions over real Azure Table storage (the session's Azurite): the 6-hour expiry,
sealed rows (no address or platform URL in the clear), a row this store cannot open, and the
reaper. Completion, which runs the purchase, is proven end to end in tests/app."""

from __future__ import annotations

import json
import uuid

import pytest

from devstack.faultproxy import FaultProxy, endpoint_port, proxied
from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.config.sealing import Sealer
from shared.protocols.ucp.checkout import TTL_SECONDS
from shared.protocols.ucp.session_rows import ABANDONED_SECONDS
from shared.protocols.ucp.sessions import CheckoutSessions
from shared.purchase.call import Caller, PurchaseCall
from shared.seams.checkout_store import PURPOSE, CheckoutStore
from shared.seams.storage import table_client
from tests.support import StoppedClock

PLATFORM = "https://platform.example/profile"
LINE = {"line_items": [{"item": {"id": "agent-starter-kit"}, "quantity": 1}]}


@pytest.fixture
def table(azurite):
    return table_client(azurite, f"ucp{uuid.uuid4().hex[:10]}", 5)


@pytest.fixture
def clock() -> StoppedClock:
    return StoppedClock()


def sessions_on(table, clock: StoppedClock, secret: str = "unit-test-secret") -> CheckoutSessions:
    store = CheckoutStore(table, Sealer(secret, PURPOSE))
    return CheckoutSessions(store, storefront=None, hasher=Hasher(secret), clock=clock)  # type: ignore[arg-type]


def body(answer) -> dict:
    return json.loads(answer.body)


def test_a_session_left_open_six_hours_reads_as_canceled_and_cannot_change(table, clock):
    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    made = body(sessions.create(platform, LINE, None))
    clock.now += TTL_SECONDS - 1
    still = body(sessions.get(platform, made["id"]))
    clock.now += 1

    expired = body(sessions.get(platform, made["id"]))
    update = sessions.update(platform, made["id"], LINE)

    assert made["expires_at"] == "2030-03-17T23:46:40Z"
    assert still["status"] == "incomplete"
    assert expired["status"] == "canceled" and "expires_at" not in expired
    assert (update.status, body(update)["code"]) == (409, "checkout_not_modifiable")


def test_a_sessions_row_holds_neither_the_address_nor_the_platform_in_the_clear(table, clock):
    sessions = sessions_on(table, clock)
    email = "grace.hopper@example.org"

    made = body(sessions.create(sessions.platform_id(PLATFORM), {**LINE, "buyer": {"email": email}}, None))

    [entity] = list(table.list_entities())
    text = json.dumps(dict(entity))
    assert made["buyer"]["email"] == email
    assert email not in text and "grace" not in text and "platform.example" not in text
    assert set(entity) == {"PartitionKey", "RowKey", "Sealed", "KeepUntil", "Due"}


def test_a_row_sealed_under_another_secret_is_an_outage_not_a_crash(table, clock):
    before = sessions_on(table, clock, "the-old-secret")
    made = body(before.create(before.platform_id(PLATFORM), LINE, None))
    after = sessions_on(table, clock, "the-new-secret")

    with pytest.raises(StorageOutage):
        after.get(after.platform_id(PLATFORM), made["id"])


def test_the_reaper_deletes_a_session_two_days_after_it_ends(table, clock):
    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    ended = body(sessions.create(platform, LINE, None))["id"]
    sessions.cancel(platform, ended)
    clock.now += TTL_SECONDS
    open_one = body(sessions.create(platform, LINE, None))["id"]
    clock.now += ABANDONED_SECONDS - TTL_SECONDS + 1

    reaped = sessions.reap()

    assert reaped == 1
    assert body(sessions.get(platform, ended))["messages"][0]["code"] == "not_found"
    assert body(sessions.get(platform, open_one))["status"] == "canceled", "expired, kept a while"


def session_at(clock, platform: str, letter: str, status: str, lines: list, buyer: dict, lasts: float):
    """A session as stored: opened now on the stopped clock, expiring `lasts` seconds later."""
    from shared.protocols.ucp.checkout import Session

    return Session("chk_" + letter * 26, platform, status, lines, buyer, clock(), clock() + lasts)


def test_a_completed_session_and_so_its_order_is_kept_thirty_days(table, clock):
    from shared.protocols.ucp.checkout import Line
    from shared.protocols.ucp.session_rows import RETENTION_SECONDS, SessionRows
    from shared.purchase.catalog import find_bundle

    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    done = session_at(clock, platform, "b", "completed", [Line(find_bundle("agent-starter-kit"))], {}, 0)
    SessionRows(CheckoutStore(table, Sealer("unit-test-secret", PURPOSE)), clock).insert(done)
    clock.now += ABANDONED_SECONDS + 1
    kept = sessions.reap()
    clock.now += RETENTION_SECONDS

    assert (kept, sessions.reap()) == (0, 1)


def test_a_session_whose_bundle_left_the_catalog_cannot_complete_and_says_why(table, clock):
    from shared.seams.checkout_store import Row

    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    held = session_at(clock, platform, "c", "ready_for_complete", [], {"email": "a@example.org"}, 60)
    record = {**held.record(), "lines": [{"bundle": "retired-bundle", "quantity": 1}]}
    store = CheckoutStore(table, Sealer("unit-test-secret", PURPOSE))
    store.create(Row(held.id, "checkout", record, clock() + 60))

    answer = sessions.complete(platform, held.id, {"payment": {}}, call=None)  # type: ignore[arg-type]

    assert answer.status == 200
    assert body(answer)["status"] == "incomplete"
    assert [m["code"] for m in body(answer)["messages"]] == ["missing"]


class Purchases:
    """The store's purchase as a complete sees it: answers given in turn, calls counted."""

    def __init__(self, *answers: tuple[int, dict]):
        self.answers, self.calls = list(answers), 0

    def purchase(self, call):
        from shared.purchase.call import Outcome

        self.calls += 1
        status, receipt, *sent = self.answers.pop(0)
        retry_after = 5 if status >= 400 else None
        return Outcome(
            status, json.dumps(receipt).encode(), retry_after=retry_after, may_have_sent=bool(sent)
        )


MAYBE_SENT = (
    503,
    {
        "checks": [
            {"name": "idempotency", "result": "pass", "detail": "key kept with its recovery points"},
            {"name": "fulfillment_email", "result": "fail", "detail": "Brevo did not answer in time"},
        ],
        "error": {"code": "upstream_unavailable", "message": "Brevo did not answer in time"},
    },
    True,  # the purchase kept its key: the email may be out
)
LIMITED = (429, {"checks": [], "error": {"code": "rate_limited", "message": "rate limit reached"}})
SENT = (
    200,
    {"receipt_id": "rcpt_x", "receipt_url": "https://shop.example/api/receipts/rcpt_x", "checks": []},
)


def held_sessions(table, clock, purchases: Purchases) -> CheckoutSessions:
    store = CheckoutStore(table, Sealer("unit-test-secret", PURPOSE))
    return CheckoutSessions(store, purchases, Hasher("unit-test-secret"), resume_within=3600, clock=clock)  # type: ignore[arg-type]


def test_a_failed_complete_never_reopens_a_session_another_complete_has_taken_over(table, clock):
    sessions = held_sessions(table, clock, Purchases())
    platform = sessions.platform_id(PLATFORM)
    made = body(sessions.create(platform, {**LINE, "buyer": {"email": "ada@example.org"}}, None))["id"]

    first = sessions._rows.hold(platform, made, 3600)  # complete A holds it; its purchase will fail
    second = sessions._rows.hold(platform, made, 3600)  # complete B resumes it; its purchase is sending
    sessions._settle(platform, made, "ready_for_complete", first.hold)  # A's failure lands late
    still = body(sessions.get(platform, made))["status"]
    moved = sessions.update(platform, made, {**LINE, "buyer": {"email": "mallory@example.org"}})
    done = sessions._settle(
        platform, made, "completed", second.hold, order={"id": "o", "label": "l", "permalink_url": "u"}
    )

    assert still == "complete_in_progress"
    assert body(moved)["buyer"]["email"] == "ada@example.org", "no other buyer while it is held"
    assert body(done)["status"] == "completed"


def test_a_held_session_is_resumed_only_while_its_purchase_key_lives(table, clock):
    purchases = Purchases(MAYBE_SENT, SENT)
    sessions = held_sessions(table, clock, purchases)
    platform = sessions.platform_id(PLATFORM)
    made = body(sessions.create(platform, {**LINE, "buyer": {"email": "ada@example.org"}}, None))["id"]
    call = PurchaseCall(None, None, "127.0.0.1", Caller("ucp"))

    lost = sessions.complete(platform, made, {"payment": {}}, call)
    clock.now += 3599
    resumed = sessions.complete(platform, made, {"payment": {}}, call)
    other = body(
        held_sessions(table, clock, purchases).create(
            platform, {**LINE, "buyer": {"email": "b@example.org"}}, None
        )
    )["id"]
    purchases.answers.append(MAYBE_SENT)
    sessions.complete(platform, other, {"payment": {}}, call)
    clock.now += 3600
    late = sessions.complete(platform, other, {"payment": {}}, call)

    assert lost.status == 503 and body(sessions.get(platform, made))["status"] != "ready_for_complete"
    assert resumed.status == 200 and body(resumed)["status"] == "completed"
    assert (late.status, body(late)["code"]) == (409, "checkout_not_modifiable")
    assert purchases.calls == 3, "the late complete ran no purchase"


def test_a_complete_refused_before_anything_was_sent_leaves_the_session_ready_again(table, clock):
    purchases = Purchases(LIMITED)
    sessions = held_sessions(table, clock, purchases)
    platform = sessions.platform_id(PLATFORM)
    made = body(sessions.create(platform, {**LINE, "buyer": {"email": "ada@example.org"}}, None))["id"]
    call = PurchaseCall(None, None, "127.0.0.1", Caller("ucp"))

    refused = sessions.complete(platform, made, {"payment": {}}, call)

    assert (refused.status, body(refused)["code"]) == (429, "rate_limited")
    assert body(sessions.get(platform, made))["status"] == "ready_for_complete"


def test_storage_lost_right_after_the_purchase_leaves_the_session_held_and_a_retry_finishes_it(
    azurite, clock
):
    """The purchase answered 200 (the email went), then Table storage dropped before the session
    could say completed: the session stays held, nothing can change it, and the next complete
    resumes the purchase (its key replays the same receipt) and completes it."""
    with FaultProxy(endpoint_port(azurite, "Table")) as proxy:
        table = table_client(proxied(azurite, table=proxy), f"ucp{uuid.uuid4().hex[:10]}", 2)

        class DropsAfter(Purchases):
            def purchase(self, call):
                answer = super().purchase(call)
                if self.calls == 1:
                    proxy.set("cut")
                return answer

        purchases = DropsAfter(SENT, SENT)
        sessions = held_sessions(table, clock, purchases)
        platform = sessions.platform_id(PLATFORM)
        made = body(sessions.create(platform, {**LINE, "buyer": {"email": "ada@example.org"}}, None))["id"]
        call = PurchaseCall(None, None, "127.0.0.1", Caller("ucp"))

        with pytest.raises(StorageOutage):
            sessions.complete(platform, made, {"payment": {}}, call)
        proxy.set("pass")
        held = body(sessions.get(platform, made))["status"]
        canceled = sessions.cancel(platform, made)
        finished = sessions.complete(platform, made, {"payment": {}}, call)

    assert held == "complete_in_progress" and canceled.status == 409
    assert finished.status == 200 and body(finished)["status"] == "completed"
    assert purchases.calls == 2, "the retry ran the purchase under the same key, which replays"
