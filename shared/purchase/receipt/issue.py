"""The purchase's last steps, issue and record: the signed receipt, and putting it on record.

A receipt answered 200 is on record: in Blob and the ledger, or in one of them with a repair entry
in the other store that `shared.seams.repair` completes once that store is back. A refusal gets a signed
receipt too, recorded nowhere."""

from __future__ import annotations

import json
import logging
import time

from shared.config.errors import NotConfigured, StorageOutage, StorefrontError, StoreUnavailable
from shared.purchase.call import OPERATION, Attempt, Outcome, PurchaseServices, iso
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import RECEIPT_VERSION, encode
from shared.seams.ledger import money

log = logging.getLogger("storefront.purchase")


class Issuer:
    def __init__(self, services: PurchaseServices):
        self._s = services

    def issue(self, attempt: Attempt) -> None:
        """Issue the receipt once the email is recorded. A taker whose predecessor may have
        issued one already (the recovery point with it never landed) adopts that receipt when
        it is queued for repair; one already in Blob wins at the write-once write."""
        if attempt.receipt_body is not None:
            return
        if attempt.resumed:
            try:
                queued = self._s.repairs.queued(attempt.receipt_id)
            except StorageOutage:
                raise StoreUnavailable(
                    "the receipt an earlier attempt may have issued cannot be looked up yet; retry "
                    "with the same idempotency key",
                    retry_after=5,
                ) from None
            if queued is not None:
                attempt.receipt_body, attempt.inherited_receipt = queued, True
                return
        attempt.receipt_body = encode(self._signed(self._receipt(attempt, "fulfilled", None)))

    def record(self, attempt: Attempt) -> bytes | None:
        """The receipt as it stands on record, retrying within the configured patience; None
        when no store would take it."""
        deadline = time.monotonic() + self._s.config.record_patience_seconds
        pause = 0.1
        while True:
            body = self._record_once(attempt)
            if body is not None or time.monotonic() + pause > deadline:
                return body
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _record_once(self, attempt: Attempt) -> bytes | None:
        """Blob (write-once: an earlier holder's bytes win; tagged until the repair timer has
        seen its ledger row) and the ledger row. When Blob is down, the bytes are queued for
        repair in the Table before the ledger row names them. A receipt that a taker issued
        itself goes nowhere before Blob confirms no earlier one exists."""
        receipt_id, body = attempt.receipt_id, attempt.receipt_body
        if body is None:
            raise ValueError(f"receipt {receipt_id} is recorded before it was issued")
        receipt = json.loads(body)
        try:
            stored = self._s.receipts.write_once(receipt_id, body, ledger_day=receipt["issued_at"][:10])
        except StorageOutage as exc:
            log.warning("receipt %s not in Blob yet: %s", receipt_id, exc)
            if attempt.resumed and not attempt.inherited_receipt:
                return None
            try:
                self._s.repairs.queue(receipt_id, body)
            except StorageOutage as exc:
                log.warning("receipt %s not queued for repair either: %s", receipt_id, exc)
                return None
        else:
            if stored != body:
                body, receipt = stored, json.loads(stored)
        try:
            self._s.ledger.add(receipt)
        except StorageOutage as exc:
            log.warning("receipt %s not in the ledger yet (the repair timer adds it): %s", receipt_id, exc)
        return body

    def refusal(self, attempt: Attempt, exc: StorefrontError) -> Outcome:
        status = "refused" if exc.status < 500 else "failed"
        receipt = self._signed(self._receipt(attempt, status, exc))
        return Outcome(exc.status, encode(receipt), retry_after=exc.retry_after)

    def _signed(self, receipt: dict) -> dict:
        """The receipt with its signature; null when the store has no usable signing key."""
        try:
            keys = self._s.keys()
        except NotConfigured:
            return {**receipt, "signature": None}
        return {**receipt, "signature": signatures.sign(receipt, keys)}

    def _receipt(self, attempt: Attempt, status: str, exc: StorefrontError | None) -> dict:
        fulfilled = exc is None
        limits = self._s.governance.limits
        validated = attempt.validated
        bundle = validated.purchase.bundle if validated else None
        return {
            "receipt_id": attempt.receipt_id,
            "version": RECEIPT_VERSION,
            "issued_at": iso(self._s.clock()),
            "operation": OPERATION,
            "status": status,
            "bundle": {"id": bundle.id, "title": bundle.title} if bundle else None,
            "buyer": {"id": validated.buyer_id, "hint": validated.buyer_hint} if validated else None,
            "billing": {
                "amount": bundle.price if bundle else "0.00",
                "currency": bundle.currency if bundle else "USD",
                "cost_estimate": money(limits.cost_per_purchase_usd) if fulfilled else "0.00",
                "cost_currency": "USD",
            },
            "checks": attempt.checks.as_list(),
            "receipt_url": self._s.config.receipt_url(attempt.receipt_id) if fulfilled else None,
            "download": (
                {"token_id": attempt.token.jti, "expires_at": iso(attempt.token.expires_at)}
                if fulfilled and attempt.token
                else None
            ),
            "error": (
                None
                if exc is None
                else {
                    "code": exc.code,
                    "message": exc.message,
                    "retry_after_seconds": exc.retry_after,
                }
            ),
            "caller": attempt.call.caller.as_dict(),
        }
