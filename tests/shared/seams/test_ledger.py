"""shared.seams.ledger on Azurite: one entity per fulfilled receipt, on one of its UTC day's shard
partitions; a day's listing reads every shard and the day's partition from before the shards, and
pages through its receipts with an opaque cursor while the totals cover the whole day. Every test
has its own table."""

from __future__ import annotations

import base64
import contextlib
import json
import time
import uuid
from collections.abc import Iterator

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.data.tables import UpdateMode

from devstack.counting import RoundTrips
from devstack.run import DEV_ACCOUNT_KEY
from shared.config.errors import InvalidRequest, StorageOutage
from shared.purchase.receipt.document import new_receipt_id
from shared.seams.ledger import MAX_PAGE_SIZE, SHARDS, DayListing, LedgerEntry, TableLedger, shard_of
from shared.seams.repair import PARTITION as REPAIR_PARTITION
from shared.seams.repair import RepairQueue
from shared.seams.storage import create_table, table_client

DAY = "2026-11-30"
DEAD_TABLES = (
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
    f"AccountKey={DEV_ACCOUNT_KEY};TableEndpoint=http://127.0.0.1:9/devstoreaccount1;"
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
def counted(azurite, table) -> Iterator[tuple[TableLedger, RoundTrips]]:
    """A second ledger on the same table, every request it sends recorded."""
    trips = RoundTrips()
    client = table_client(azurite, table.table_name, 5, trips.transport("table"))
    yield TableLedger(client), trips
    client.close()


@pytest.fixture
def dead_ledger() -> TableLedger:
    return TableLedger(table_client(DEAD_TABLES, "ledger", 1))


def receipt(
    issued_at: str = f"{DAY}T10:00:00Z",
    amount: str = "0.00",
    currency: str = "USD",
    cost: str = "0.01",
    bundle_id: str = "agent-starter-kit",
    agent: dict | None = None,
) -> dict:
    return {
        "receipt_id": new_receipt_id(),
        "version": 1,
        "issued_at": issued_at,
        "status": "fulfilled",
        "bundle": {"id": bundle_id, "title": bundle_id.replace("-", " ").title()},
        "buyer": {"id": "f" * 64, "hint": "a***@e***.org"},
        "billing": {"amount": amount, "currency": currency, "cost_estimate": cost, "cost_currency": "USD"},
        "caller": {"channel": "http", "user_agent": "test", "agent": agent or {"verified": False}},
    }


def all_pages(ledger: TableLedger, date: str, page_size: int) -> list[DayListing]:
    pages = [ledger.day(date, page_size=page_size)]
    while pages[-1].next_cursor is not None:
        assert len(pages) < 100, "the cursor does not advance"
        pages.append(ledger.day(date, page_size=page_size, cursor=pages[-1].next_cursor))
    return pages


def record_before_shards(table, recorded: dict, **changes: str) -> None:
    """The receipt's row as the ledger wrote it before the shards: in the bare day's partition."""
    entry = LedgerEntry.from_receipt(recorded)
    create_table(table)
    columns = {
        "IssuedAt": entry.issued_at,
        "BundleId": entry.bundle_id,
        "BundleTitle": entry.bundle_title,
        "Amount": entry.amount,
        "Currency": entry.currency,
        "CostEstimate": entry.cost_estimate,
        "CostCurrency": entry.cost_currency,
    }
    table.upsert_entity(
        {"PartitionKey": entry.issued_at[:10], "RowKey": entry.receipt_id, **columns, **changes}
    )


def partitions(table) -> set[str]:
    return {entity["PartitionKey"] for entity in table.list_entities(select=["PartitionKey"])}


def cursor_of(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


# --- recording and listing -------------------------------------------------------------------------


def test_a_recorded_receipt_is_listed_on_its_day_with_the_days_totals(ledger):
    recorded = receipt(cost="0.01")

    ledger.add(recorded)

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
                "agent_origin": "",
                "agent_key": "",
            }
        ],
        "next_cursor": None,
    }


def test_the_first_record_creates_the_ledger_table(ledger, table):
    with pytest.raises(ResourceNotFoundError):
        table.get_table_access_policy()

    ledger.add(receipt())

    assert table.get_table_access_policy() == {}


def test_the_ledger_entity_holds_the_billing_figures_and_nothing_about_the_buyer(ledger, table):
    recorded = receipt(amount="4.50", currency="EUR", cost="0.02")

    ledger.add(recorded)

    entity = table.get_entity(shard_of(DAY, recorded["receipt_id"]), recorded["receipt_id"])
    assert dict(entity) == {
        "PartitionKey": shard_of(DAY, recorded["receipt_id"]),
        "RowKey": recorded["receipt_id"],
        "IssuedAt": f"{DAY}T10:00:00Z",
        "BundleId": "agent-starter-kit",
        "BundleTitle": "Agent Starter Kit",
        "Amount": "4.50",
        "Currency": "EUR",
        "CostEstimate": "0.02",
        "CostCurrency": "USD",
        "AgentOrigin": "",
        "AgentKey": "",
    }
    assert "f" * 64 not in json.dumps(dict(entity)) and "a***@e***.org" not in json.dumps(dict(entity))


def test_a_verified_agents_receipt_is_listed_with_its_origin_and_key(ledger):
    agent = {"verified": True, "origin": "https://agent.example", "key_thumbprint": "k" * 43}
    named, unverified = receipt(agent=agent), receipt()
    old = receipt()
    del old["caller"]["agent"]  # issued before agents were verified

    for recorded in (named, unverified, old):
        ledger.add(recorded)

    rows = {entry.receipt_id: (entry.agent_origin, entry.agent_key) for entry in ledger.day(DAY).receipts}
    assert rows[named["receipt_id"]] == ("https://agent.example", "k" * 43)
    assert rows[unverified["receipt_id"]] == rows[old["receipt_id"]] == ("", "")


def test_a_row_written_before_agents_were_recorded_reads_as_unverified(ledger, table):
    recorded = receipt()
    ledger.add(recorded)
    partition = shard_of(DAY, recorded["receipt_id"])
    entity = dict(table.get_entity(partition, recorded["receipt_id"]))
    del entity["AgentOrigin"], entity["AgentKey"]
    table.upsert_entity(entity, mode=UpdateMode.REPLACE)

    (entry,) = [e for e in ledger.day(DAY).receipts if e.receipt_id == recorded["receipt_id"]]

    assert (entry.agent_origin, entry.agent_key) == ("", "")


def test_totals_sum_every_receipt_of_the_day_per_currency(ledger):
    for amount, currency, cost in [
        ("1.25", "USD", "0.01"),
        ("2.50", "USD", "0.005"),
        ("0.10", "EUR", "0.01"),
        ("0.00", "EUR", "0.01"),
        ("3.05", "USD", "0.01"),
    ]:
        ledger.add(receipt(amount=amount, currency=currency, cost=cost))

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
        ledger.add(receipt(amount=f"0.{cents:02d}"))

    pages = all_pages(ledger, DAY, page_size=2)

    assert [len(page.receipts) for page in pages] == [2, 2, 2, 1]
    for page in pages:
        assert page.count == 7
        assert page.totals == {"USD": {"amount": "0.28", "cost_estimate": "0.07"}}


@pytest.mark.parametrize("page_size", [1, 3, 4, 11, 12, MAX_PAGE_SIZE])
def test_following_the_cursor_visits_every_receipt_exactly_once(ledger, page_size):
    recorded = {receipt()["receipt_id"]: None for _ in range(11)}
    for receipt_id in recorded:
        ledger.add({**receipt(), "receipt_id": receipt_id})

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
        ledger.add(one)

    pages = all_pages(ledger, DAY, page_size=3)

    listed = [(entry.issued_at, entry.receipt_id) for page in pages for entry in page.receipts]
    assert listed == sorted((r["issued_at"], r["receipt_id"]) for r in recorded)
    assert [len(page.receipts) for page in pages] == [3, 3, 1]
    assert {page.count for page in pages} == {7}


def test_a_cursor_from_the_listing_ordered_by_receipt_id_is_refused_saying_to_start_again(ledger):
    ledger.add(receipt())
    old_cursor = cursor_of({"PartitionKey": DAY, "RowKey": new_receipt_id()})

    with pytest.raises(InvalidRequest) as caught:
        ledger.day(DAY, cursor=old_cursor)

    assert caught.value.code == "invalid_cursor"
    assert "open the day's first page again" in caught.value.message


def test_the_cursor_is_opaque_url_safe_text(ledger):
    for _ in range(3):
        ledger.add(receipt())

    cursor = ledger.day(DAY, page_size=1).next_cursor

    assert cursor and set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_a_cursor_can_be_followed_again_with_the_same_result(ledger):
    for _ in range(5):
        ledger.add(receipt())
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
        ledger.add(recorded)

    listing = ledger.day(DAY)

    assert sorted(e.receipt_id for e in listing.receipts) == sorted(r["receipt_id"] for r in inside)
    assert listing.count == 2
    assert listing.totals == {"USD": {"amount": "0.00", "cost_estimate": "0.02"}}
    assert ledger.day("2026-11-29").count == 1
    assert ledger.day("2026-12-01").count == 1


# --- shards, and the day's partition from before them ---------------------------------------------


def test_a_days_receipts_land_on_many_shard_partitions_of_that_day(ledger, table):
    recorded = [receipt() for _ in range(40)]
    for one in recorded:
        ledger.add(one)

    found = partitions(table)

    assert found == {shard_of(DAY, r["receipt_id"]) for r in recorded}
    assert found <= {f"{DAY}_{shard:02d}" for shard in range(SHARDS)}
    assert len(found) >= 8  # 40 receipts over 16 shards: fewer than 8 is a one in 10^10 draw
    assert ledger.day(DAY).count == 40


def test_a_receipts_shard_is_the_sha256_of_its_id_modulo_the_shard_count():
    assert SHARDS == 16
    assert shard_of(DAY, "rcpt_aaaaaaaaaaaaaaaaaaaaaaaaab") == f"{DAY}_06"
    assert shard_of("2026-12-01", "rcpt_aaaaaaaaaaaaaaaaaaaaaaaaab") == "2026-12-01_06"
    assert shard_of(DAY, "rcpt_aaaaaaaaaaaaaaaaaaaaaaaaaa") == f"{DAY}_00"
    assert {shard_of(DAY, f"r_{n}")[-3:] for n in range(200)} == {f"_{shard:02d}" for shard in range(SHARDS)}


def test_a_day_lists_the_rows_of_every_shard_and_those_written_before_the_shards(ledger, table):
    sharded = [receipt(issued_at=f"{DAY}T12:00:{n:02d}Z", amount="1.00") for n in range(12)]
    older = [receipt(issued_at=f"{DAY}T08:00:{n:02d}Z", amount="0.10", currency="EUR") for n in range(3)]
    for one in sharded:
        ledger.add(one)
    for one in older:
        record_before_shards(table, one)

    listing = ledger.day(DAY, page_size=MAX_PAGE_SIZE)

    assert DAY in partitions(table) and len(partitions(table)) > 2
    assert [e.receipt_id for e in listing.receipts] == [r["receipt_id"] for r in older + sharded]
    assert listing.receipts[0] == LedgerEntry.from_receipt(older[0])
    assert listing.count == 15
    assert listing.totals == {
        "EUR": {"amount": "0.30", "cost_estimate": "0.03"},
        "USD": {"amount": "12.00", "cost_estimate": "0.12"},
    }


def test_neighbouring_days_and_the_repair_queue_are_not_in_a_days_listing(ledger, table):
    inside = receipt(issued_at=f"{DAY}T12:00:00Z")
    ledger.add(inside)
    for day in ("2026-11-29", "2026-12-01", "2025-11-30", "2027-11-30"):
        ledger.add(receipt(issued_at=f"{day}T00:00:00Z"))
        record_before_shards(table, receipt(issued_at=f"{day}T23:59:59Z"))
    RepairQueue(table).queue(new_receipt_id(), b'{"receipt_id": "queued"}')

    listing = ledger.day(DAY)

    assert REPAIR_PARTITION in partitions(table)
    assert [e.receipt_id for e in listing.receipts] == [inside["receipt_id"]]
    assert listing.count == 1
    assert [ledger.day(day).count for day in ("2026-11-29", "2026-12-01", "2025-11-30")] == [2, 2, 2]


def test_has_finds_a_row_in_its_shard_with_one_point_read(ledger, counted):
    recorded = receipt()
    ledger.add(recorded)
    counted_ledger, trips = counted

    assert counted_ledger.has(DAY, recorded["receipt_id"]) is True
    assert [(sent.method, shard_of(DAY, recorded["receipt_id"]) in sent.url) for sent in trips.sent] == [
        ("GET", True)
    ]


def test_has_finds_a_row_written_before_the_shards_on_its_days_partition(table, counted):
    older = receipt()
    record_before_shards(table, older)
    counted_ledger, trips = counted

    assert counted_ledger.has(DAY, older["receipt_id"]) is True
    assert len(trips.sent) == 2  # its shard, then the bare day


@pytest.mark.parametrize("day", [DAY, "2026-11-29"], ids=["missing", "other-day"])
def test_has_is_false_for_a_receipt_without_a_row_on_that_day(ledger, table, day):
    elsewhere = receipt(issued_at="2026-12-01T00:00:00Z")
    ledger.add(elsewhere)
    record_before_shards(table, receipt(issued_at="2026-12-01T00:00:00Z"))

    assert ledger.has(day, elsewhere["receipt_id"]) is False
    assert ledger.has(day, new_receipt_id()) is False


def test_a_receipt_with_rows_in_both_layouts_is_listed_and_totalled_once(ledger, table):
    recorded = receipt(amount="2.00")
    record_before_shards(table, recorded, Amount="1.00")
    ledger.add(recorded)
    ledger.add(receipt(amount="0.50"))

    listing = ledger.day(DAY)

    assert len(list(table.list_entities())) == 3
    assert recorded["receipt_id"] in [e.receipt_id for e in listing.receipts]
    assert listing.count == 2
    assert listing.totals == {"USD": {"amount": "2.50", "cost_estimate": "0.02"}}


def test_the_cursor_pages_through_every_shard_and_the_older_rows_in_issue_order(ledger, table):
    times = [f"{DAY}T{hour:02d}:{minute:02d}:00Z" for hour in (23, 0, 12, 6) for minute in (30, 0, 30, 59)]
    recorded = [receipt(issued_at=time) for time in times]
    for one in recorded[:12]:
        ledger.add(one)
    for one in recorded[12:]:
        record_before_shards(table, one)

    pages = all_pages(ledger, DAY, page_size=5)

    listed = [(entry.issued_at, entry.receipt_id) for page in pages for entry in page.receipts]
    assert listed == sorted((r["issued_at"], r["receipt_id"]) for r in recorded)
    assert [len(page.receipts) for page in pages] == [5, 5, 5, 1]
    assert {page.count for page in pages} == {16}
    assert len(partitions(table)) > 2


# --- idempotence -----------------------------------------------------------------------------------


def test_recording_the_same_receipt_twice_counts_it_once(ledger, table):
    recorded = receipt(amount="1.00")

    ledger.add(recorded)
    ledger.add(recorded)

    assert [e["RowKey"] for e in table.list_entities()] == [recorded["receipt_id"]]
    listing = ledger.day(DAY)
    assert [e.receipt_id for e in listing.receipts] == [recorded["receipt_id"]]
    assert listing.count == 1
    assert listing.totals == {"USD": {"amount": "1.00", "cost_estimate": "0.01"}}


def test_a_second_record_of_a_receipt_replaces_its_entry(ledger):
    recorded = receipt(amount="1.00")
    ledger.add(recorded)

    ledger.add({**recorded, "billing": {**recorded["billing"], "amount": "2.00"}})

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
    ledger.add(receipt(issued_at="2028-02-29T12:00:00Z"))

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
        ledger.add(receipt())

    with pytest.raises(InvalidRequest) as caught:
        ledger.day(DAY, page_size=1, cursor=cursor)

    assert caught.value.code == "invalid_cursor"


# --- missing table and outages ---------------------------------------------------------------------


def test_a_day_of_a_ledger_table_that_does_not_exist_is_an_empty_listing(ledger, table):
    with pytest.raises(ResourceNotFoundError):
        table.get_table_access_policy()

    assert ledger.day(DAY) == DayListing(DAY, [], 0, {}, None)


def test_an_empty_day_of_an_existing_table_is_an_empty_listing(ledger):
    ledger.add(receipt(issued_at="2026-11-29T12:00:00Z"))

    assert ledger.day(DAY) == DayListing(DAY, [], 0, {}, None)


def test_recording_during_a_storage_outage_is_store_unavailable(dead_ledger):
    started = time.monotonic()

    with pytest.raises(StorageOutage, match="ledger table unavailable"):
        dead_ledger.add(receipt())

    assert time.monotonic() - started < 10


def test_listing_during_a_storage_outage_is_store_unavailable(dead_ledger):
    with pytest.raises(StorageOutage, match="ledger table unavailable"):
        dead_ledger.day(DAY)


def test_looking_for_a_row_during_a_storage_outage_is_store_unavailable(dead_ledger):
    with pytest.raises(StorageOutage, match="ledger table unavailable"):
        dead_ledger.has(DAY, new_receipt_id())
