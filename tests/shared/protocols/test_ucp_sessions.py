"""Checkout sessions over real Azure Table storage (the session's Azurite): the 6-hour expiry,
sealed rows (no address or platform URL in the clear), a row this store cannot open, and the
reaper. Completion, which runs the purchase, is proven end to end in tests/app."""

from __future__ import annotations

import json
import uuid

import pytest

from shared.config.errors import StorageOutage
from shared.config.hashing import Hasher
from shared.config.sealing import Sealer
from shared.protocols.ucp.checkout import TTL_SECONDS
from shared.protocols.ucp.session_rows import ABANDONED_SECONDS
from shared.protocols.ucp.sessions import CheckoutSessions
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


def test_a_completed_session_and_so_its_order_is_kept_thirty_days(table, clock):
    from shared.protocols.ucp.checkout import Line, Session
    from shared.protocols.ucp.session_rows import RETENTION_SECONDS, SessionRows
    from shared.purchase.catalog import find_bundle

    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    done = Session(
        "chk_" + "b" * 26,
        platform,
        "completed",
        [Line(find_bundle("agent-starter-kit"))],
        {},
        clock(),
        clock(),
    )
    SessionRows(CheckoutStore(table, Sealer("unit-test-secret", PURPOSE)), clock).insert(done)
    clock.now += ABANDONED_SECONDS + 1
    kept = sessions.reap()
    clock.now += RETENTION_SECONDS

    assert (kept, sessions.reap()) == (0, 1)


def test_a_session_whose_bundle_left_the_catalog_cannot_complete_and_says_why(table, clock):
    from shared.protocols.ucp.checkout import Session
    from shared.seams.checkout_store import Row

    sessions = sessions_on(table, clock)
    platform = sessions.platform_id(PLATFORM)
    held = Session(
        "chk_" + "c" * 26,
        platform,
        "ready_for_complete",
        [],
        {"email": "a@example.org"},
        clock(),
        clock() + 60,
    )
    record = {**held.record(), "lines": [{"bundle": "retired-bundle", "quantity": 1}]}
    store = CheckoutStore(table, Sealer("unit-test-secret", PURPOSE))
    store.create(Row(held.id, "checkout", record, clock() + 60))

    answer = sessions.complete(platform, held.id, {"payment": {}}, call=None)  # type: ignore[arg-type]

    assert answer.status == 200
    assert body(answer)["status"] == "incomplete"
    assert [m["code"] for m in body(answer)["messages"]] == ["missing"]
