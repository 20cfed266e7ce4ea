"""The purchase flow, the same for the MCP tool and the HTTP endpoint.

    key → claim (or replay / 409 in progress / 422 reused) → rate limit → input validation →
    cost ceiling → contact upsert + token [recovery point] → fulfillment email [recovery point] →
    receipt blob (write-once) → claim completed

With a key, the purchase runs under a claim (`shared.idempotency`): one request at a time per key,
across every instance. Each external effect is recorded on the claim as it completes, so a request
that takes over a dead holder's claim resumes instead of redoing effects. For the gap between
sending the email and recording it, the email carries a Brevo idempotency key and a tag, both
derived from the claim: a taker first looks for the tag in Brevo's transactional log, then sends
with the key, which Brevo recognises as a repeat for about 30 minutes. Failures
release the claim, so a retry runs again. Storage outages fail open: the purchase proceeds and the
receipt marks the guard that was not in force as `degraded`.
"""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from shared import signatures
from shared.brevo import IDEMPOTENCY_WINDOW_SECONDS, BrevoClient, Email
from shared.catalog import Bundle
from shared.errors import (
    KeyInUse,
    KeyReused,
    LimitExceeded,
    NotConfigured,
    StorefrontError,
    StoreUnavailable,
    UpstreamUnavailable,
)
from shared.governance import Governance, Reservation
from shared.hashing import Hasher
from shared.idempotency import Claim, Claimed, ClaimLost, IdempotencyHandler, InProgress, Mismatch, Replay
from shared.keys import KeySet
from shared.ledger import TableLedger
from shared.receipts import (
    RECEIPT_VERSION,
    BlobReceiptStore,
    Checks,
    encode,
    mask_email,
    money,
    new_receipt_id,
)
from shared.schema import PurchaseInput, canonical_request, read_idempotency_key, validate_arguments
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
    download_token_ttl_seconds: int = 7 * 24 * 3600
    missing_secrets: tuple[str, ...] = ()


@dataclass
class _Attempt:
    """What one run of the flow has learnt so far; turned into the receipt at the end."""

    call: PurchaseCall
    receipt_id: str = field(default_factory=new_receipt_id)
    checks: Checks = field(default_factory=Checks)
    claim: Claim | None = None
    resumed: bool = False
    brevo_key: str | None = None
    claimed_at: float = 0.0
    buyer: dict | None = None
    bundle: Bundle | None = None
    token: DownloadToken | None = None
    email_attempted: bool = False
    receipt_body: bytes | None = None
    reservations: list[Reservation] = field(default_factory=list)

    @property
    def email_tag(self) -> str | None:
        """The tag an email for this claim carries in Brevo's log (no key or address in it)."""
        return f"purchase-{self.brevo_key}" if self.brevo_key else None

    def progress(self) -> dict:
        """What a taker needs to resume: the checks done so far and, once issued, the receipt
        itself (so a retry stores exactly what the first caller got). The download token needs
        nothing here: its claims derive from the claim (`Claim.token_id`, `created_at`)."""
        progress: dict = {"checks": self.checks.recorded()}
        if self.receipt_body is not None:
            progress["receipt"] = self.receipt_body.decode()
        return progress

    def resume(self, progress: dict) -> None:
        self.checks.restore(progress.get("checks", {}))
        if isinstance(progress.get("receipt"), str):
            self.receipt_body = progress["receipt"].encode()


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
        clock: Callable[[], float] = time.time,
    ):
        self._config = config
        self._hasher = hasher
        self._idempotency = idempotency
        self._governance = governance
        self._receipts = receipts
        self._brevo = brevo
        self._keys = keys
        self._ledger = ledger
        self._clock = clock

    @property
    def receipts(self) -> BlobReceiptStore:
        return self._receipts

    def receipt_url(self, receipt_id: str) -> str:
        return f"{self._config.public_base_url}/api/receipts/{receipt_id}"

    def reap_expired_keys(self) -> int:
        """Delete idempotency claims past their expiry (the timer trigger's job)."""
        return self._idempotency.reap()

    def purchase(self, call: PurchaseCall) -> Outcome:
        attempt = _Attempt(call)
        limits = self._governance.limits
        try:
            replay = self._check_key(attempt)
            if replay is not None:
                return replay
            if attempt.receipt_body is not None:
                return self._complete(attempt)
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
        key_hash = self._hasher.idempotency_key(key)
        fingerprint = self._hasher.request(canonical_request(attempt.call.arguments))
        try:
            begun = self._idempotency.begin(key_hash, fingerprint, attempt.receipt_id)
        except StoreUnavailable as exc:
            log.warning("idempotency store unreachable, proceeding without it: %s", exc)
            checks.record("idempotency", "degraded", "store unreachable; retries are not protected")
            return None
        if isinstance(begun, Replay):
            return Outcome(200, begun.body, replayed=True)
        if isinstance(begun, InProgress):
            message = "a request with this idempotency key is still running; retry shortly"
            checks.record("idempotency", "fail", message)
            raise KeyInUse(message, retry_after=begun.retry_after)
        if isinstance(begun, Mismatch):
            message = "this idempotency key was already used with a different request"
            checks.record("idempotency", "fail", message)
            raise KeyReused(message)
        self._hold(attempt, begun)
        return None

    def _hold(self, attempt: _Attempt, claimed: Claimed) -> None:
        attempt.claim = claimed.claim
        attempt.receipt_id = claimed.claim.receipt_id
        attempt.brevo_key = claimed.claim.brevo_idempotency_key()
        attempt.claimed_at = claimed.claim.created_at
        attempt.resumed = claimed.resumed
        if claimed.resumed:
            attempt.resume(claimed.claim.progress)
            detail = "key claimed after an interrupted attempt; resumed from its recovery points"
        else:
            detail = "key claimed; a retry with it replays this receipt"
        attempt.checks.record("idempotency", "pass", detail)

    def _guard(self, attempt: _Attempt, check: str, reserve: Callable[[], Reservation], within: str) -> None:
        """Take one governance reservation; an unreachable counter store fails open."""
        if attempt.checks.has(check):
            return
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
        signer = TokenSigner(
            self._keys(), self._config.public_base_url, self._config.download_token_ttl_seconds, self._clock
        )
        checks = attempt.checks
        if not checks.has("contact_upsert"):
            try:
                outcome = self._brevo.upsert_contact(purchase.email, purchase.name)
            except StorefrontError as exc:
                checks.record("contact_upsert", "fail", exc.message)
                raise
            checks.record("contact_upsert", "pass", f"contact {outcome} in Brevo")
        claim = attempt.claim
        attempt.token = signer.mint(
            purchase.bundle.id,
            jti=claim.token_id() if claim else None,
            issued_at=int(claim.created_at) or None if claim else None,
        )
        self._checkpoint(attempt)
        if checks.has("fulfillment_email"):
            return
        attempt.email_attempted = True
        try:
            earlier = self._earlier_send(attempt, purchase)
            if earlier is not None:
                detail = f"already accepted by Brevo as {earlier} before a restart (found in its log)"
                checks.record("fulfillment_email", "pass", detail)
                self._checkpoint(attempt)
                return
            message_id = self._brevo.send_email(self._email(purchase, attempt), attempt.brevo_key)
        except StorefrontError as exc:
            checks.record("fulfillment_email", "fail", exc.message)
            raise
        if message_id is None:
            checks.record("fulfillment_email", "pass", "already accepted by Brevo before a restart")
        else:
            checks.record("fulfillment_email", "pass", f"accepted by Brevo as {message_id}")
        self._checkpoint(attempt)

    def _earlier_send(self, attempt: _Attempt, purchase: PurchaseInput) -> str | None:
        """For a resumed claim, the message id of the email an earlier attempt got accepted, if
        Brevo's log shows one. Brevo's idempotency key covers sends inside its window even when
        the log lags or cannot be read; past the window, only the log can tell, so a failed
        lookup stops the run (503) rather than risk a second email."""
        if not attempt.resumed or attempt.email_tag is None:
            return None
        try:
            return self._brevo.find_sent(purchase.email, attempt.email_tag)
        except StorefrontError as exc:
            if self._clock() - attempt.claimed_at < IDEMPOTENCY_WINDOW_SECONDS:
                log.warning("Brevo's log unreadable (%s); the idempotency key covers the resend", exc)
                return None
            if not isinstance(exc, UpstreamUnavailable):
                raise  # a lasting refusal (502): retrying soon would not help
            raise UpstreamUnavailable(
                "Brevo's log could not confirm whether the earlier attempt's email went out; retry later",
                retry_after=max(exc.retry_after or 0, 30),
            ) from None

    def _checkpoint(self, attempt: _Attempt) -> None:
        """Record a recovery point on the claim. Losing the claim stops the run (409)."""
        if attempt.claim is None:
            return
        try:
            attempt.claim = self._idempotency.checkpoint(attempt.claim, attempt.progress())
        except ClaimLost:
            attempt.claim = None
            raise KeyInUse(
                "another request took over this idempotency key; retry shortly", retry_after=1
            ) from None
        except StoreUnavailable as exc:
            log.warning("recovery point not recorded, continuing without the claim: %s", exc)
            attempt.claim = None
            attempt.checks.record("idempotency", "degraded", "store became unreachable mid-purchase")

    def _email(self, purchase: PurchaseInput, attempt: _Attempt) -> Email:
        token = attempt.token
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
            tags=("storefront", bundle.id, *((attempt.email_tag,) if attempt.email_tag else ())),
        )

    def _release(self, attempt: _Attempt, exc: StorefrontError) -> None:
        """Let a retry run again: free the claim, and give governance reservations back unless
        the caller caused the failure (bad input counts against the rate limit)."""
        sent = attempt.email_attempted or attempt.checks.has("fulfillment_email")
        if attempt.claim is not None:
            self._idempotency.release(attempt.claim, keep_progress=sent)
        # Once the email may have gone out, the purchase counts: the retry resumes without
        # taking the guards again, so the reservations stay.
        if not sent and (exc.status >= 500 or isinstance(exc, LimitExceeded)):
            for reservation in attempt.reservations:
                self._governance.release(reservation)

    def _complete(self, attempt: _Attempt) -> Outcome:
        if attempt.receipt_body is None:
            attempt.receipt_body = encode(self._signed(self._receipt(attempt, "fulfilled", None)))
        body = attempt.receipt_body
        try:
            if not self._receipts.write(attempt.receipt_id, body):
                # A holder that died after writing the receipt: its bytes are the answer.
                body = self._receipts.read(attempt.receipt_id) or body
        except StoreUnavailable as exc:
            log.error("receipt %s not stored yet (%s); the next retry stores it", attempt.receipt_id, exc)
            self._hand_over(attempt)
            return Outcome(200, body)
        try:
            self._ledger.record(json.loads(body))
        except StoreUnavailable as exc:
            log.warning("receipt %s missing from the finance ledger: %s", attempt.receipt_id, exc)
        if attempt.claim is not None:
            not_after = attempt.token.expires_at if attempt.token else None
            try:
                self._idempotency.complete(attempt.claim, body, not_after=not_after)
            except (ClaimLost, StoreUnavailable) as exc:
                log.warning("claim not completed (%s); a retry after the lease will finish it", exc)
        return Outcome(200, body)

    def _hand_over(self, attempt: _Attempt) -> None:
        """Keep the issued receipt on the claim and end the lease, so the next retry stores and
        returns these exact bytes instead of issuing another receipt."""
        if attempt.claim is None:
            return
        try:
            attempt.claim = self._idempotency.checkpoint(attempt.claim, attempt.progress())
        except (ClaimLost, StoreUnavailable):
            return
        self._idempotency.release(attempt.claim, keep_progress=True)

    def _refusal(self, attempt: _Attempt, exc: StorefrontError) -> Outcome:
        status = "refused" if exc.status < 500 else "failed"
        receipt = self._signed(self._receipt(attempt, status, exc))
        return Outcome(exc.status, encode(receipt), retry_after=exc.retry_after)

    def _signed(self, receipt: dict) -> dict:
        """The receipt with its signature; null when the store has no usable signing key."""
        try:
            keys = self._keys()
        except NotConfigured:
            return {**receipt, "signature": None}
        return {**receipt, "signature": signatures.sign(receipt, keys)}

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
                "cost_estimate": money(limits.cost_per_purchase_usd) if fulfilled else "0.00",
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
