"""The purchase, the same for the MCP tool, the HTTP endpoint and A2A: `Storefront` wires the
purchase's steps to the exactly-once executor and the stores.

With a key, the purchase runs once per key and buyer, across every instance, and fails closed:
when the claim store cannot be reached as it starts, or its receipt cannot be put on record, it
answers 503 with Retry-After and the retry gets the one receipt. The governance counters and
unkeyed purchases fail open. docs/idempotency.md#the-order-of-the-flow has the flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from shared.config.errors import StorageOutage, StorefrontError
from shared.config.hashing import Hasher
from shared.config.keys import KeySet
from shared.exactly_once.executor import ExactlyOnce
from shared.exactly_once.idempotency import IdempotencyHandler
from shared.purchase.call import (
    Outcome,
    PurchaseCall,
    PurchaseServices,
    StoreConfig,
)
from shared.purchase.governance import Governance
from shared.purchase.guards import Guards
from shared.purchase.operation import PurchaseOperation
from shared.purchase.receipt.issue import Issuer
from shared.seams.brevo import BrevoClient
from shared.seams.contact_queue import ContactQueue
from shared.seams.ledger import TableLedger
from shared.seams.receipt_store import BlobReceiptStore
from shared.seams.repair import RepairQueue

log = logging.getLogger("storefront.purchase")


class Storefront:
    def __init__(
        self,
        config: StoreConfig,
        *,
        hasher: Hasher,
        idempotency: IdempotencyHandler,
        governance: Governance,
        receipts: BlobReceiptStore,
        brevo: BrevoClient,
        keys: Callable[[], KeySet],
        ledger: TableLedger,
        repairs: RepairQueue,
        contacts: ContactQueue,
        clock: Callable[[], float] = time.time,
    ):
        self._services = PurchaseServices(
            config, hasher, governance, receipts, brevo, keys, ledger, repairs, contacts, clock
        )
        self._idempotency = idempotency
        self._executor = ExactlyOnce(idempotency, fail_open=config.idempotency_fail_open, log=log)
        self._guards = Guards(governance, hasher)
        self._issuer = Issuer(self._services)

    def receipt_url(self, receipt_id: str) -> str:
        return self._services.config.receipt_url(receipt_id)

    def stored_receipt(self, receipt_id: str) -> bytes | None:
        """A receipt on record: its blob, or the bytes queued for it while Blob was down (so its
        `receipt_url` answers before the repair timer has run). Raises StorageOutage when
        neither store can say."""
        try:
            body = self._services.receipts.read(receipt_id)
        except StorageOutage:
            body = None
        return body if body is not None else self._services.repairs.queued(receipt_id)

    def reap_expired_keys(self) -> int:
        """Delete idempotency claims past their expiry (the timer trigger's job)."""
        return self._idempotency.reap()

    def repair_receipts(self) -> int:
        """Put on record the receipts answered while a store was down (the timer trigger's job)."""
        return self._services.repairs.run(self._services.receipts, self._services.ledger)

    def purchase(self, call: PurchaseCall) -> Outcome:
        operation = PurchaseOperation(call, self._services, self._guards, self._issuer)
        try:
            return operation.answer(self._executor.run(operation, operation.key()))
        except StorefrontError as exc:
            return replace(operation.refusal(exc), may_have_sent=operation.attempt.may_have_sent)

    def refuse(self, call: PurchaseCall, exc: StorefrontError) -> Outcome:
        """A failure receipt for a request that could not even be read (body not JSON, too large) or
        that the buyer would not complete (an MCP form for the email declined): nothing counted."""
        operation = PurchaseOperation(call, self._services, self._guards, self._issuer)
        operation.attempt.checks.set("input_schema", "fail", exc.message)
        return operation.refusal(exc)
