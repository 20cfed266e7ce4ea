"""Receipts answered while one store was down, put on record once it is back.

A fulfilled receipt belongs in two places: its write-once blob (behind `receipt_url`) and its
ledger row (the finance listing). When Blob is down, the flow queues the receipt's bytes here, in
the ledger table's `repair-blob` partition (a partition no day listing reads), before it writes
the ledger row. Every receipt blob is written tagged `ledger_day=<day>`, so one whose ledger row
never followed (the Table was down, or the host died between the two writes) is found by its
tag. The `repair_receipts` timer drains both. Every step is idempotent (write-once blob, upserted
ledger row, deletes and tag removal last), so a run cut short is simply run again.
"""

from __future__ import annotations

import itertools
import json
import time
from concurrent.futures import ThreadPoolExecutor

from azure.core.exceptions import AzureError, ResourceNotFoundError
from azure.data.tables import TableClient, UpdateMode

from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.storage import on_table, outage

PARTITION = "repair-blob"
WHAT = "repair queue"
WORKERS = 16  # receipts settled at once: each is two calls that wait on the network
PAGE = 256  # tagged receipts taken at a time, so a long backlog is never held in memory
BUDGET = 240.0  # seconds: a run takes no new page after this, inside the 5-minute function timeout


class RepairQueue:
    def __init__(self, table: TableClient):
        self._table = table

    def queue(self, receipt_id: str, body: bytes) -> None:
        """Keep a receipt's bytes until its blob is written. Raises StorageOutage."""
        entity = {"PartitionKey": PARTITION, "RowKey": receipt_id, "Body": body.decode()}
        try:
            on_table(self._table, WHAT, lambda: self._table.upsert_entity(entity, mode=UpdateMode.REPLACE))
        except ResourceNotFoundError as exc:
            raise outage(exc, WHAT) from exc

    def queued(self, receipt_id: str) -> bytes | None:
        """The bytes queued for this receipt, if any. Raises StorageOutage."""
        try:
            entity = self._table.get_entity(PARTITION, receipt_id)
        except ResourceNotFoundError:
            return None
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        return str(entity["Body"]).encode()

    def run(self, receipts: BlobReceiptStore, ledger: TableLedger, *, budget_seconds: float = BUDGET) -> int:
        """Finish every queued receipt and every receipt still tagged as awaiting its ledger row,
        taking no new page of tagged receipts after `budget_seconds`; returns how many needed it.
        Raises StorageOutage when a store is still down (the next run goes on)."""
        until = time.monotonic() + budget_seconds
        return self._drain_blob_queue(receipts, ledger) + _drain_ledger_tags(receipts, ledger, until)

    def _drain_blob_queue(self, receipts: BlobReceiptStore, ledger: TableLedger) -> int:
        try:
            entities = list(self._table.query_entities("PartitionKey eq @pk", parameters={"pk": PARTITION}))
        except ResourceNotFoundError:
            return 0
        except AzureError as exc:
            raise outage(exc, WHAT) from exc
        for entity in entities:
            receipt_id = entity["RowKey"]
            body = receipts.write_once(receipt_id, str(entity["Body"]).encode())
            ledger.add(json.loads(body))
            try:
                self._table.delete_entity(PARTITION, receipt_id)
            except AzureError as exc:
                raise outage(exc, WHAT) from exc
        return len(entities)


def _drain_ledger_tags(receipts: BlobReceiptStore, ledger: TableLedger, until: float) -> int:
    """Receipts whose blobs still carry the ledger tag: write the missing rows, drop the tags.
    Every receipt passes through here once (two calls: a ledger point read, the tag's removal),
    so receipts are settled `WORKERS` at a time, a page of them after another, and the run stops
    taking pages at `until` (the next run goes on). Returns how many rows were missing."""
    missing = 0
    waiting = receipts.awaiting_ledger()
    with ThreadPoolExecutor(WORKERS) as pool:
        while time.monotonic() < until:
            page = list(itertools.islice(waiting, PAGE))
            missing += sum(pool.map(lambda found: _settle(receipts, ledger, *found), page))
            if len(page) < PAGE:
                break
    return missing


def _settle(receipts: BlobReceiptStore, ledger: TableLedger, receipt_id: str, day: str) -> int:
    """Put one tagged receipt's ledger row in place if it is missing (1), then drop its tag."""
    missing = 0
    if not ledger.has(day, receipt_id):
        body = receipts.read(receipt_id)
        if body is None:
            return 0
        ledger.add(json.loads(body))
        missing = 1
    receipts.ledger_recorded(receipt_id)
    return missing
