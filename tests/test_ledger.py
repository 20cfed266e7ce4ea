"""shared.seams.ledger on Azurite: one entity per fulfilled receipt, partitioned by UTC day; a day's
listing pages through its receipts with an opaque cursor while the totals cover the whole day.
Every test has its own table."""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid

import pytest
from azure.core.exceptions import ResourceNotFoundError

from shared.config.errors import InvalidRequest, StoreUnavailable
from shared.seams.ledger import MAX_PAGE_SIZE, DayListing, LedgerEntry, TableLedger
from shared.seams.receipts import new_receipt_id
from shared.seams.storage import table_client
from tests.support import AZURITE_KEY

DAY = "2026-11-30"
DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={AZURITE_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
)


@pytest.fixture
def table(azurite):
    client = table_client(azurite, "ledger" + uuid.uuid4().hex[:16], 5)
    yield client
    with contextlib.suppress(ResourceNotFoundError):
        client.delete_table()
    client.close()


@pytest.fixture
def ledger(table) -> TableLedger:
    return TableLedger(table)


@pytest.fixture
def dead_ledger() -> TableLedger:
    return TableLedger(table_client(DEAD_TABLES, "ledger", 1))


def receipt(
    issued_at: str = f"{DAY}T10:00:00Z",
    amount: str = "0.00",
    currency: str = "USD",
    cost: str = "0.01",
    bundle_id: str = "agent-starter-kit",
) -> dict:
    return {
        "receipt_id": new_receipt_id(),
        "version": 1,
        "issued_at": issued_at,
        "status": "fulfilled",
        "bundle": {"id": bundle_id, "title": bundle_id.replace("-", " ").title()},
        "buyer": {"id": "f" * 64, "hint": "a***@e***.org"},
        "billing": {"amount": amount, "currency": currency, "cost_estimate": cost, "cost_currency": "USD"},
        "caller": {"channel": "http", "user_agent": "test"},
    }


def all_pages(ledger: TableLedger, date: str, page_size: int) -> list[DayListing]:
    pages = [ledger.day(date, page_size=page_size)]
    while pages[-1].next_cursor is not None:
        assert len(pages) < 100, "the cursor does not advance"
        pages.append(ledger.day(date, page_size=page_size, cursor=pages[-1].next_cursor))
    return pages


def cursor_of(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


# --- recording and listing -------------------------------------------------------------------------


def test_a_recorded_receipt_is_listed_on_its_day_with_the_days_totals(ledger):
    recorded = receipt(cost="0.01")

    ledger.record(recorded)

    listing = ledger.day(DAY)
    assert listing.receipts == [LedgerEntry.from_receipt(recorded)]
    assert listing.count == 1
    assert listing.totals == {"USD": {"amount": "0.00", "cost_estimate": "0.01"}}
    assert listing.next_cursor is None
    assert listing.as_dict() == {
        "date": DAY,
        "count": 1,
        "totals": {"USD": {"amount": "0.00", "cost_estimate": "0.01"}},
        "receipts": [
            {
                "receipt_id": recorded["receipt_id"],
                "issued_at": f"{DAY}T10:00:00Z",
                "bundle_id": "agent-starter-kit",
                "bundle_title": "Agent Starter Kit",
                "amount": "0.00",
                "currency": "USD",
                "cost_estimate": "0.01",
                "cost_currency": "USD",
            }
        ],
        "next_cursor": None,
    }


def test_the_first_record_creates_the_ledger_table(ledger, table):
    with pytest.raises(ResourceNotFoundError):
        table.get_table_access_policy()

    ledger.record(receipt())

    assert table.get_table_access_policy() == {}


def test_the_ledger_entity_holds_the_billing_figures_and_nothing_about_the_buyer(ledger, table):
    recorded = receipt(amount="4.50", currency="EUR", cost="0.02")

    ledger.record(recorded)

    entity = table.get_entity(DAY, recorded["receipt_id"])
    assert dict(entity) == {
        "PartitionKey": DAY,
        "RowKey": recorded["receipt_id"],
        "IssuedAt": f"{DAY}T10:00:00Z",
        "BundleId": "agent-starter-kit",
        "BundleTitle": "Agent Starter Kit",
        "Amount": "4.50",
        "Currency": "EUR",
        "CostEstimate": "0.02",
        "CostCurrency": "USD",
    }
    assert "f" * 64 not in json.dumps(dict(entity)) and "a***@e***.org" not in json.dumps(dict(entity))


def test_totals_sum_every_receipt_of_the_day_per_currency(ledger):
    for amount, currency, cost in [
        ("1.25", "USD", "0.01"),
        ("2.50", "USD", "0.005"),
        ("0.10", "EUR", "0.01"),
        ("0.00", "EUR", "0.01"),
        ("3.05", "USD", "0.01"),
    ]:
        ledger.record(receipt(amount=amount, currency=currency, cost=cost))

    listing = ledger.day(DAY)

    assert listing.count == 5
    assert listing.totals == {
        "EUR": {"amount": "0.10", "cost_estimate": "0.02"},
        "USD": {"amount": "6.80", "cost_estimate": "0.025"},
    }
    assert list(listing.totals) == ["EUR", "USD"]


# --- pagination ------------------------------------------------------------------------------------


def test_totals_and_count_cover_the_whole_day_on_every_page(ledger):
    for cents in range(1, 8):
        ledger.record(receipt(amount=f"0.{cents:02d}"))

    pages = all_pages(ledger, DAY, page_size=2)

    assert [len(page.receipts) for page in pages] == [2, 2, 2, 1]
    for page in pages:
        assert page.count == 7
        assert page.totals == {"USD": {"amount": "0.28", "cost_estimate": "0.07"}}


@pytest.mark.parametrize("page_size", [1, 3, 4, 11, 12, MAX_PAGE_SIZE])
def test_following_the_cursor_visits_every_receipt_exactly_once(ledger, page_size):
    recorded = {receipt()["receipt_id"]: None for _ in range(11)}
    for receipt_id in recorded:
        ledger.record({**receipt(), "receipt_id": receipt_id})

    pages = all_pages(ledger, DAY, page_size)

    listed = [entry.receipt_id for page in pages for entry in page.receipts]
    assert sorted(listed) == sorted(recorded)
    assert len(listed) == len(set(listed)) == 11
    assert all(len(page.receipts) <= page_size for page in pages)
    assert len(pages) == -(-11 // page_size)
    assert listed == sorted(listed)  # one issue time: ties go by receipt id
    assert pages[-1].next_cursor is None


def test_a_day_is_listed_in_issue_order_then_receipt_id_across_pages(ledger):
    times = ["23:59:59", "00:00:00", "12:00:00", "00:00:01", "12:00:00", "09:30:00", "12:00:00"]
    recorded = [receipt(issued_at=f"{DAY}T{time}Z") for time in times]
    for one in recorded:
        ledger.record(one)

    pages = all_pages(ledger, DAY, page_size=3)

    listed = [(entry.issued_at, entry.receipt_id) for page in pages for entry in page.receipts]
    assert listed == sorted((r["issued_at"], r["receipt_id"]) for r in recorded)
    assert [len(page.receipts) for page in pages] == [3, 3, 1]
    assert {page.count for page in pages} == {7}


def test_a_cursor_from_the_listing_ordered_by_receipt_id_is_refused_saying_to_start_again(ledger):
    ledger.record(receipt())
    old_cursor = cursor_of({"PartitionKey": DAY, "RowKey": new_receipt_id()})

    with pytest.raises(InvalidRequest) as caught:
        ledger.day(DAY, cursor=old_cursor)

    assert caught.value.code == "invalid_cursor"
    assert "open the day's first page again" in caught.value.message


def test_the_cursor_is_opaque_url_safe_text(ledger):
    for _ in range(3):
        ledger.record(receipt())

    cursor = ledger.day(DAY, page_size=1).next_cursor

    assert cursor and set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_a_cursor_can_be_followed_again_with_the_same_result(ledger):
    for _ in range(5):
        ledger.record(receipt())
    cursor = ledger.day(DAY, page_size=2).next_cursor

    first, again = (ledger.day(DAY, page_size=2, cursor=cursor) for _ in range(2))

    assert first == again


def test_receipts_of_other_days_are_not_listed(ledger):
    inside = [receipt(issued_at=f"{DAY}T00:00:00Z"), receipt(issued_at=f"{DAY}T23:59:59Z")]
    outside = [
        receipt(issued_at="2026-11-29T23:59:59Z"),
        receipt(issued_at="2026-12-01T00:00:00Z"),
        receipt(issued_at="2025-11-30T12:00:00Z"),
    ]
    for recorded in inside + outside:
        ledger.record(recorded)

    listing = ledger.day(DAY)

    assert sorted(e.receipt_id for e in listing.receipts) == sorted(r["receipt_id"] for r in inside)
    assert listing.count == 2
    assert listing.totals == {"USD": {"amount": "0.00", "cost_estimate": "0.02"}}
    assert ledger.day("2026-11-29").count == 1
    assert ledger.day("2026-12-01").count == 1


# --- idempotence -----------------------------------------------------------------------------------


def test_recording_the_same_receipt_twice_counts_it_once(ledger):
    recorded = receipt(amount="1.00")

    ledger.record(recorded)
    ledger.record(recorded)

    listing = ledger.day(DAY)
    assert [e.receipt_id for e in listing.receipts] == [recorded["receipt_id"]]
    assert listing.count == 1
    assert listing.totals == {"USD": {"amount": "1.00", "cost_estimate": "0.01"}}


def test_a_second_record_of_a_receipt_replaces_its_entry(ledger):
    recorded = receipt(amount="1.00")
    ledger.record(recorded)

    ledger.record({**recorded, "billing": {**recorded["billing"], "amount": "2.00"}})

    listing = ledger.day(DAY)
    assert listing.count == 1
    assert listing.receipts[0].amount == "2.00"


# --- bad input -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "date",
    [
        "",
        "yesterday",
        "20261130",
        "2026-1-30",
        "2026-11-3",
        "26-11-30",
        "2026-13-01",
        "2026-00-10",
        "2026-11-00",
        "2026-11-32",
        "2026/11/30",
        "2026-11-30T00:00:00Z",
        "2026-11-30\n",
        " 2026-11-30",
        "2026-11-30' or PartitionKey ne '",
    ],
)
def test_a_malformed_date_is_invalid_date_before_storage_is_touched(dead_ledger, date):
    with pytest.raises(InvalidRequest) as caught:
        dead_ledger.day(date)

    assert caught.value.status == 400
    assert caught.value.code == "invalid_date"


@pytest.mark.parametrize("date", ["2026-02-30", "2026-11-31", "2026-02-29", "2026-04-31", "２０２６-11-30"])
def test_a_date_that_does_not_exist_is_invalid_date(dead_ledger, date):
    with pytest.raises(InvalidRequest) as caught:
        dead_ledger.day(date)

    assert caught.value.code == "invalid_date"


def test_a_leap_day_is_a_valid_date(ledger):
    ledger.record(receipt(issued_at="2028-02-29T12:00:00Z"))

    assert ledger.day("2028-02-29").count == 1


@pytest.mark.parametrize("page_size", [0, -1, MAX_PAGE_SIZE + 1, 10_000])
def test_a_page_size_out_of_range_is_invalid_page_size(dead_ledger, page_size):
    with pytest.raises(InvalidRequest) as caught:
        dead_ledger.day(DAY, page_size=page_size)

    assert caught.value.status == 400
    assert caught.value.code == "invalid_page_size"
    assert str(MAX_PAGE_SIZE) in caught.value.message


@pytest.mark.parametrize("page_size", [1, MAX_PAGE_SIZE])
def test_the_smallest_and_largest_page_sizes_are_accepted(ledger, page_size):
    assert ledger.day(DAY, page_size=page_size).count == 0


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("!!!!", id="not-base64"),
        pytest.param("a", id="bad-base64-length"),
        pytest.param(base64.urlsafe_b64encode(b"not json").decode(), id="not-json"),
        pytest.param(base64.urlsafe_b64encode(b"\xff\xfe\x00").decode(), id="not-utf8"),
        pytest.param(cursor_of([]), id="array"),
        pytest.param(cursor_of(None), id="null"),
        pytest.param(cursor_of(7), id="number"),
        pytest.param(cursor_of("PartitionKey"), id="string"),
        pytest.param("eyJQYXJ0aXRpb25LZXkiOi", id="truncated"),
    ],
)
def test_a_garbage_cursor_is_invalid_cursor_before_storage_is_touched(dead_ledger, cursor):
    with pytest.raises(InvalidRequest) as caught:
        dead_ledger.day(DAY, cursor=cursor)

    assert caught.value.status == 400
    assert caught.value.code == "invalid_cursor"


@pytest.mark.parametrize(
    "cursor",
    [cursor_of({}), cursor_of({"x": 1}), cursor_of({"PartitionKey": 5, "RowKey": 6})],
    ids=["empty-object", "other-members", "non-string-keys"],
)
def test_a_cursor_shaped_like_an_object_but_not_issued_is_invalid_cursor(ledger, cursor):
    for _ in range(3):
        ledger.record(receipt())

    with pytest.raises(InvalidRequest) as caught:
        ledger.day(DAY, page_size=1, cursor=cursor)

    assert caught.value.code == "invalid_cursor"


# --- missing table and outages ---------------------------------------------------------------------


def test_a_day_of_a_ledger_table_that_does_not_exist_is_an_empty_listing(ledger, table):
    with pytest.raises(ResourceNotFoundError):
        table.get_table_access_policy()

    assert ledger.day(DAY) == DayListing(DAY, [], 0, {}, None)


def test_an_empty_day_of_an_existing_table_is_an_empty_listing(ledger):
    ledger.record(receipt(issued_at="2026-11-29T12:00:00Z"))

    assert ledger.day(DAY) == DayListing(DAY, [], 0, {}, None)


def test_recording_during_a_storage_outage_is_store_unavailable(dead_ledger):
    started = time.monotonic()

    with pytest.raises(StoreUnavailable, match="ledger table unavailable"):
        dead_ledger.record(receipt())

    assert time.monotonic() - started < 10


def test_listing_during_a_storage_outage_is_store_unavailable(dead_ledger):
    with pytest.raises(StoreUnavailable, match="ledger table unavailable"):
        dead_ledger.day(DAY)
