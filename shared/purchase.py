"""The purchase flow, the same for the MCP tool and the HTTP endpoint.

    key check → replay? → rate limit → input validation → cost ceiling →
    contact upsert → download token → fulfillment email → receipt blob → key record

A valid idempotency key is looked up before anything else runs; a hit returns the stored receipt
byte for byte and runs nothing. Only fulfilled purchases are recorded, so every failure can be
retried. Storage outages fail open: the purchase proceeds and the receipt marks the guard that was
not in force as `degraded`.
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from shared.brevo import BrevoClient, Email
from shared.catalog import Bundle
from shared.errors import LimitExceeded, NotConfigured, StorefrontError, StoreUnavailable
from shared.governance import Governance, Reservation
from shared.hashing import Hasher
from shared.idempotency import IdempotencyRecord, IdempotencyStore
from shared.receipts import (
    RECEIPT_VERSION,
    BlobReceiptStore,
    Checks,
    encode,
    mask_email,
    new_receipt_id,
    sha256,
)
from shared.schema import PurchaseInput, read_idempotency_key, validate_arguments
from shared.tokens import DownloadToken, TokenSigner

log = logging.getLogger("storefront.purchase")
OPERATION = "purchase_free_bundle"


@dataclass(frozen=True)
class Caller:
    channel: str
    user_agent: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"channel": self.channel, "user_agent": self.user_agent[:200]}


@dataclass(frozen=True)
class PurchaseCall:
    arguments: object
    header_key: str | None
    client_ip: str
    caller: Caller


@dataclass(frozen=True)
class Outcome:
    status: int
    body: bytes
    replayed: bool = False
    retry_after: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass(frozen=True)
class StoreConfig:
    public_base_url: str
    sender_email: str
    sender_name: str
    missing_secrets: tuple[str, ...] = ()


@dataclass
class _Attempt:
    """What one run of the flow has learnt so far; turned into the receipt at the end."""

    call: PurchaseCall
    receipt_id: str = field(default_factory=new_receipt_id)
    checks: Checks = field(default_factory=Checks)
    key_hash: str | None = None
    key_recordable: bool = False
    buyer: dict | None = None
    bundle: Bundle | None = None
    token: DownloadToken | None = None
    reservations: list[Reservation] = field(default_factory=list)


class Storefront:
    def __init__(
        self,
        config: StoreConfig,
        *,
        hasher: Hasher,
        idempotency: IdempotencyStore,
        governance: Governance,
        receipts: BlobReceiptStore,
        brevo: BrevoClient,
        signer: Callable[[], TokenSigner],
        clock: Callable[[], float] = time.time,
    ):
        self._config = config
        self._hasher = hasher
        self._idempotency = idempotency
        self._governance = governance
        self._receipts = receipts
        self._brevo = brevo
        self._signer = signer
        self._clock = clock

    @property
    def receipts(self) -> BlobReceiptStore:
        return self._receipts

    def receipt_url(self, receipt_id: str) -> str:
        return f"{self._config.public_base_url}/api/receipts/{receipt_id}"

    def purchase(self, call: PurchaseCall) -> Outcome:
        attempt = _Attempt(call)
        limits = self._governance.limits
        try:
            replay = self._check_key(attempt)
            if replay is not None:
                return replay
            self._guard(
                attempt,
                "rate_limit",
                lambda: self._governance.reserve_rate(call.client_ip),
                f"within {limits.rate_limit_per_hour} per hour",
            )
            purchase = self._validate(attempt)
            self._guard(
                attempt,
                "cost_ceiling",
                self._governance.reserve_cost,
                f"within ${limits.daily_cost_ceiling_usd} per day "
                f"(this purchase ${limits.cost_per_purchase_usd})",
            )
            self._fulfil(attempt, purchase)
        except StorefrontError as exc:
            self._release(attempt, exc)
            return self._refusal(attempt, exc)
        return self._complete(attempt)

    def refuse(self, call: PurchaseCall, exc: StorefrontError) -> Outcome:
        """A failure receipt for a request that could not even be read (body not JSON, too large)."""
        attempt = _Attempt(call)
        attempt.checks.record("input_schema", "fail", exc.message)
        return self._refusal(attempt, exc)

    def _check_key(self, attempt: _Attempt) -> Outcome | None:
        checks = attempt.checks
        try:
            key = read_idempotency_key(attempt.call.arguments, attempt.call.header_key)
        except StorefrontError as exc:
            checks.record("idempotency", "fail", exc.message)
            raise
        if key is None:
            checks.record("idempotency", "skipped", "no key supplied; a retry would buy again")
            return None
        attempt.key_hash = self._hasher.idempotency_key(key)
        try:
            record = self._idempotency.get(attempt.key_hash)
            if record is not None:
                return self._replay(record)
        except StoreUnavailable as exc:
            log.warning("idempotency lookup failed, proceeding without it: %s", exc)
            checks.record("idempotency", "degraded", "store unreachable; retries are not protected")
            return None
        attempt.key_recordable = True
        checks.record("idempotency", "pass", "new key; a retry with it replays this receipt")
        return None

    def _replay(self, record: IdempotencyRecord) -> Outcome:
        body = self._receipts.read(record.receipt_id)
        if body is None or sha256(body) != record.receipt_sha256:
            log.error("receipt %s for a recorded key is missing or altered", record.receipt_id)
            raise StoreUnavailable("stored receipt missing or altered")
        return Outcome(200, body, replayed=True)

    def _guard(self, attempt: _Attempt, check: str, reserve: Callable[[], Reservation], within: str) -> None:
        """Take one governance reservation; an unreachable counter store fails open."""
        try:
            attempt.reservations.append(reserve())
        except LimitExceeded as exc:
            attempt.checks.record(check, "fail", exc.message)
            raise
        except StoreUnavailable as exc:
            log.warning("%s not enforced: %s", check, exc)
            attempt.checks.record(check, "degraded", "counter store unreachable; not enforced")
            return
        attempt.checks.record(check, "pass", within)

    def _validate(self, attempt: _Attempt) -> PurchaseInput:
        try:
            purchase = validate_arguments(attempt.call.arguments)
        except StorefrontError as exc:
            attempt.checks.record("input_schema", "fail", exc.message)
            raise
        attempt.checks.record("input_schema", "pass", "arguments match the input schema")
        attempt.bundle = purchase.bundle
        attempt.buyer = {"id": self._hasher.email(purchase.email), "hint": mask_email(purchase.email)}
        return purchase

    def _fulfil(self, attempt: _Attempt, purchase: PurchaseInput) -> None:
        if self._config.missing_secrets:
            raise NotConfigured(
                "the store is not configured: " + ", ".join(self._config.missing_secrets) + " unset"
            )
        signer = self._signer()
        brevo = self._brevo
        checks = attempt.checks
        try:
            outcome = brevo.upsert_contact(purchase.email, purchase.name)
        except StorefrontError as exc:
            checks.record("contact_upsert", "fail", exc.message)
            raise
        checks.record("contact_upsert", "pass", f"contact {outcome} in Brevo")
        attempt.token = signer.mint(purchase.bundle.id)
        try:
            message_id = brevo.send_email(self._email(purchase, attempt.token))
        except StorefrontError as exc:
            checks.record("fulfillment_email", "fail", exc.message)
            raise
        checks.record("fulfillment_email", "pass", f"accepted by Brevo as {message_id}")

    def _email(self, purchase: PurchaseInput, token: DownloadToken) -> Email:
        link = f"{self._config.public_base_url}/api/download/{token.token}"
        bundle = purchase.bundle
        greeting = f"Hello {purchase.name}," if purchase.name else "Hello,"
        expires = _iso(token.expires_at)
        text = (
            f'{greeting}\n\nYour free bundle "{bundle.title}" is ready.\n\n'
            f"Download it here (link valid until {expires}):\n{link}\n"
        )
        page = (
            f"<p>{html.escape(greeting)}</p>"
            f"<p>Your free bundle <strong>{html.escape(bundle.title)}</strong> is ready.</p>"
            f'<p><a href="{html.escape(link)}">Download {html.escape(bundle.title)}</a></p>'
            f"<p>The link is valid until {expires}.</p>"
        )
        return Email(
            sender_email=self._config.sender_email,
            sender_name=self._config.sender_name,
            to_email=purchase.email,
            to_name=purchase.name,
            subject=f"Your {bundle.title} is ready",
            html=page,
            text=text,
            tags=("storefront", bundle.id),
        )

    def _release(self, attempt: _Attempt, exc: StorefrontError) -> None:
        """Give reservations back unless the caller caused the failure (bad input counts)."""
        if exc.status >= 500 or isinstance(exc, LimitExceeded):
            for reservation in attempt.reservations:
                self._governance.release(reservation)

    def _complete(self, attempt: _Attempt) -> Outcome:
        receipt = self._receipt(attempt, "fulfilled", None)
        body = encode(receipt)
        try:
            self._receipts.write(attempt.receipt_id, body)
        except StoreUnavailable as exc:
            log.error("receipt %s not stored (%s); it cannot be replayed", attempt.receipt_id, exc)
            return Outcome(200, body)
        if attempt.key_recordable and attempt.key_hash:
            self._record(attempt, body)
        return Outcome(200, body)

    def _record(self, attempt: _Attempt, body: bytes) -> None:
        record = IdempotencyRecord(
            key_hash=attempt.key_hash or "",
            receipt_id=attempt.receipt_id,
            receipt_sha256=sha256(body),
            created_at=_iso(self._clock()),
        )
        try:
            if not self._idempotency.put(record):
                log.warning("key already recorded by a concurrent purchase; first record kept")
        except StoreUnavailable as exc:
            log.warning("idempotency record not written: %s", exc)

    def _refusal(self, attempt: _Attempt, exc: StorefrontError) -> Outcome:
        status = "refused" if exc.status < 500 else "failed"
        receipt = self._receipt(attempt, status, exc)
        return Outcome(exc.status, encode(receipt), retry_after=exc.retry_after)

    def _receipt(self, attempt: _Attempt, status: str, exc: StorefrontError | None) -> dict:
        fulfilled = exc is None
        limits = self._governance.limits
        bundle = attempt.bundle
        return {
            "receipt_id": attempt.receipt_id,
            "version": RECEIPT_VERSION,
            "issued_at": _iso(self._clock()),
            "operation": OPERATION,
            "status": status,
            "bundle": {"id": bundle.id, "title": bundle.title} if bundle else None,
            "buyer": attempt.buyer,
            "billing": {
                "amount": bundle.price if bundle else "0.00",
                "currency": bundle.currency if bundle else "USD",
                "cost_estimate": f"{limits.cost_per_purchase_usd:.2f}" if fulfilled else "0.00",
                "cost_currency": "USD",
            },
            "checks": attempt.checks.as_list(),
            "receipt_url": self.receipt_url(attempt.receipt_id) if fulfilled else None,
            "download": (
                {"token_id": attempt.token.jti, "expires_at": _iso(attempt.token.expires_at)}
                if fulfilled and attempt.token
                else None
            ),
            "error": (
                None
                if fulfilled
                else {
                    "code": exc.code,
                    "message": exc.message,
                    "retry_after_seconds": exc.retry_after,
                }
            ),
            "caller": attempt.call.caller.as_dict(),
        }


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
