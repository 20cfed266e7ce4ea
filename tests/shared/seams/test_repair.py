"""shared.seams.repair: the repair timer's drain of receipts tagged as awaiting their ledger row, on
Azurite: every tagged receipt settled however long the backlog, page after page, and a run that
stops at its budget leaves the rest to the next."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from shared.purchase.receipt.document import encode, new_receipt_id
from shared.seams import repair
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue
from shared.seams.storage import container_client, table_client

DAY = "2030-01-02"


@pytest.fixture
def stores(azurite):
    suffix = uuid.uuid4().hex[:10]
    receipts = BlobReceiptStore(container_client(azurite, f"rcpt{suffix}", 10))
    table = table_client(azurite, f"ledger{suffix}", 10)
    return receipts, TableLedger(table), RepairQueue(table)


def tagged_receipts(receipts: BlobReceiptStore, ledger: TableLedger, count: int, recorded: int) -> list[str]:
    """`count` receipts written as the flow writes them (tagged); the first `recorded` of them
    also got their ledger row, as a healthy purchase does."""
    ids = [new_receipt_id() for _ in range(count)]

    def write(n: int) -> None:
        receipt = {
            "receipt_id": ids[n],
            "issued_at": f"{DAY}T10:00:00Z",
            "status": "fulfilled",
            "bundle": {"id": "agent-starter-kit", "title": "Agent Starter Kit"},
            "buyer": {"id": "0" * 64, "hint": "a***@example.org"},
            "billing": {"amount": "0.00", "currency": "USD", "cost_estimate": "0.01", "cost_currency": "USD"},
            "caller": {"channel": "http", "user_agent": ""},
        }
        assert receipts.write(ids[n], encode(receipt), ledger_day=DAY)
        if n < recorded:
            ledger.add(receipt)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(count)))
    return ids


def test_a_backlog_longer_than_a_page_is_settled_in_one_run(stores):
    receipts, ledger, queue = stores
    ids = tagged_receipts(receipts, ledger, repair.PAGE + 40, recorded=repair.PAGE)

    assert queue.run(receipts, ledger) == 40  # the rows that were missing

    assert list(receipts.awaiting_ledger()) == []
    assert all(ledger.has(DAY, receipt_id) for receipt_id in ids)


class Ticks:
    """Stands in for the `time` module in shared.seams.repair: `monotonic()` reads the next tick."""

    def __init__(self, *ticks: float):
        self._ticks = iter(ticks)

    def monotonic(self) -> float:
        return next(self._ticks)


def test_a_run_past_its_budget_takes_no_new_page_and_the_next_run_finishes(stores, monkeypatch):
    receipts, ledger, queue = stores
    ids = tagged_receipts(receipts, ledger, 50, recorded=0)
    monkeypatch.setattr(repair, "PAGE", 20)
    monkeypatch.setattr(repair, "time", Ticks(0.0, 0.5, 1.5))  # start, one page inside, then past

    first = queue.run(receipts, ledger, budget_seconds=1.0)
    left = len(list(receipts.awaiting_ledger()))
    monkeypatch.undo()
    second = queue.run(receipts, ledger)

    assert (first, left, second) == (20, 30, 30)
    assert all(ledger.has(DAY, receipt_id) for receipt_id in ids)
    assert list(receipts.awaiting_ledger()) == []
