"""The purchase flow, the same for the MCP tool and the HTTP endpoint.

    key → replay / 409 in progress / 422 reused / resume / vacant → rate limit → input validation →
    recipient limit → cost ceiling → claim taken (with the guards it passed) → contact create +
    token [recovery point] → fulfillment email → receipt issued [recovery point: the receipt rides
    on the claim] → receipt on record (Blob write-once + ledger row, or queued for repair) → claim
    completed

With a key, the purchase runs under a claim (`shared.idempotency`): one request at a time per key
and buyer, across every instance. The claim is taken once the guards pass, and records them, so a
request that takes over a dead holder's claim never counts the purchase twice; each external
effect is recorded as it completes, so the taker resumes instead of redoing effects. For the gap
between sending the email and recording it, the email carries a Brevo idempotency key and a tag,
both derived from the claim: a taker first looks for the tag in Brevo's transactional log, then
sends with the key, which Brevo recognises as a repeat for about 30 minutes.

A keyed purchase fails closed: when the claim store cannot be reached as it starts, or its receipt
cannot be put on record, it answers 503 with Retry-After and the retry gets the one receipt
(`STOREFRONT_IDEMPOTENCY_FAIL_OPEN` restores running without the claim, marked `degraded`). The
governance counters and unkeyed purchases fail open. A receipt answered 200 is on record: in Blob
and the ledger, or in one of them with a repair entry in the other store that `shared.repair`
completes once that store is back.
"""

from __future__ import annotations

import functools
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
    StorageDown,
    StorefrontError,
    StoreUnavailable,
    UpstreamUnavailable,
)
from shared.governance import Governance, Reservation
from shared.hashing import Hasher
from shared.idempotency import (
    Claim,
    Claimed,
    ClaimLost,
    IdempotencyHandler,
    InProgress,
    Mismatch,
    Replay,
    Vacant,
    carried,
)
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
from shared.repair import RepairQueue
from shared.schema import (
    PurchaseInput,
    canonical_request,
    check_shape,
    normalise_email,
    read_idempotency_key,
    validate_arguments,
)
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
    idempotency_fail_open: bool = False
    record_patience_seconds: float = 5.0


@dataclass
class _Attempt:
    """What one run of the flow has learnt so far; turned into the receipt at the end."""

    call: PurchaseCall
    receipt_id: str = field(default_factory=new_receipt_id)
    checks: Checks = field(default_factory=Checks)
    claim: Claim | None = None
    vacant: Vacant | None = None
    fingerprint: str = ""
    resumed: bool = False
    brevo_key: str | None = None
    claimed_at: float = 0.0
    buyer: dict | None = None
    bundle: Bundle | None = None
    token: DownloadToken | None = None
    email_attempted: bool = False
    receipt_body: bytes | None = None
    inherited_receipt: bool = False
    claim_uncertain: bool = False  # a claim write whose answer was lost: it may exist
    reservations: list[Reservation] = field(default_factory=list)

    @property
    def email_tag(self) -> str | None:
        """The tag an email for this claim carries in Brevo's log (no key or address in it)."""
        return f"purchase-{self.brevo_key}" if self.brevo_key else None

    @property
    def keyed(self) -> bool:
        return self.claim is not None or self.vacant is not None

    def progress(self) -> dict:
        """What a taker needs to resume: the checks done so far, the reservations taken (given
        back if the purchase is abandoned) and, once issued, the receipt itself (so a retry
        stores exactly what the first caller got). The download token needs nothing here: its
        claims derive from the claim (`Claim.token_id`, `created_at`)."""
        progress: dict = {
            "checks": self.checks.recorded(),
            "reservations": [[r.partition, r.row, r.amount] for r in self.reservations],
        }
        if self.receipt_body is not None and carried(self.receipt_body):
            progress["receipt"] = self.receipt_body.decode()
        return progress

    def resume(self, progress: dict) -> None:
        self.checks.restore(progress.get("checks", {}))
        self.reservations = [Reservation(p, r, int(n)) for p, r, n in progress.get("reservations", [])]
        if isinstance(progress.get("receipt"), str):
            self.receipt_body = progress["receipt"].encode()
            self.inherited_receipt = True


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
        self._repairs = repairs
        self._clock = clock

    def receipt_url(self, receipt_id: str) -> str:
        return f"{self._config.public_base_url}/api/receipts/{receipt_id}"

    def stored_receipt(self, receipt_id: str) -> bytes | None:
        """A receipt on record: its blob, or the bytes queued for it while Blob was down (so its
        `receipt_url` answers before the repair timer has run). Raises StoreUnavailable when
        neither store can say."""
        try:
            body = self._receipts.read(receipt_id)
        except StoreUnavailable:
            body = None
        return body if body is not None else self._repairs.queued(receipt_id)

    def reap_expired_keys(self) -> int:
        """Delete idempotency claims past their expiry (the timer trigger's job)."""
        return self._idempotency.reap()

    def repair_receipts(self) -> int:
        """Put on record the receipts answered while a store was down (the timer trigger's job)."""
        return self._repairs.run(self._receipts, self._ledger)

    def purchase(self, call: PurchaseCall) -> Outcome:
        attempt = _Attempt(call)
        try:
            replay = self._check_key(attempt)
            if replay is not None:
                return replay
            if attempt.receipt_body is not None:
                return self._complete(attempt)
            purchase = self._govern(attempt)
            self._take_key(attempt)
            self._fulfil(attempt, purchase)
            return self._complete(attempt)
        except StorefrontError as exc:
            self._release(attempt, exc)
            return self._refusal(attempt, exc)

    def refuse(self, call: PurchaseCall, exc: StorefrontError) -> Outcome:
        """A failure receipt for a request that could not even be read (body not JSON, too large) or
        that the buyer would not complete (an MCP form for the email declined): nothing counted."""
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
        attempt.fingerprint = self._hasher.request(canonical_request(attempt.call.arguments))
        try:
            begun = self._idempotency.begin(
                self._scoped_key(key, attempt.call.arguments),
                attempt.fingerprint,
                legacy_hash=self._hasher.idempotency_key(key),
            )
        except StoreUnavailable as exc:
            return self._key_store_down(attempt, exc)
        if isinstance(begun, Replay):
            return Outcome(200, begun.body, replayed=True)
        if isinstance(begun, InProgress):
            message = "a request with this idempotency key is still running; retry shortly"
            checks.record("idempotency", "fail", message)
            raise KeyInUse(message, retry_after=begun.retry_after)
        if isinstance(begun, Mismatch):
            message = "this idempotency key was already used with a different request"
            checks.record("idempotency", "fail", message)
            self._check_shape(attempt)  # a malformed request is told so (400) before this (422)
            raise KeyReused(message)
        if isinstance(begun, Vacant):
            attempt.vacant = begun
            checks.record("idempotency", "pass", "key free; it is claimed once the guards pass")
            return None
        self._hold(attempt, begun)
        return None

    def _scoped_key(self, key: str, arguments: object) -> str:
        email = arguments.get("email") if isinstance(arguments, dict) else None
        return scoped_key_hash(self._hasher, key, email if isinstance(email, str) else "")

    def _key_store_down(self, attempt: _Attempt, exc: StoreUnavailable) -> None:
        """The claim store is unreachable as a keyed purchase starts: refuse (503), unless the
        operator chose to run keys unprotected (`STOREFRONT_IDEMPOTENCY_FAIL_OPEN`)."""
        if self._config.idempotency_fail_open:
            log.warning("idempotency store unreachable, proceeding without it: %s", exc)
            attempt.checks.record("idempotency", "degraded", "store unreachable; retries are not protected")
            return None
        message = "the idempotency store is unreachable, so this key cannot be protected; nothing was sent"
        attempt.checks.record("idempotency", "fail", message)
        raise StorageDown(message + "; retry shortly", retry_after=5) from None

    def _hold(self, attempt: _Attempt, claimed: Claimed) -> None:
        attempt.claim = claimed.claim
        attempt.vacant = None
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

    def _govern(self, attempt: _Attempt) -> PurchaseInput:
        """The guards, in the order that lets bad input count against the client's rate; a
        resumed attempt skips those its predecessor passed (they are on the claim)."""
        limits = self._governance.limits
        call = attempt.call
        self._guard(
            attempt,
            "rate_limit",
            lambda: self._governance.reserve_rate(call.client_ip),
            f"within {limits.rate_limit_per_hour} per hour from this client",
        )
        purchase = self._validate(attempt)
        self._guard_recipient(attempt, purchase.email)
        self._guard(
            attempt,
            "cost_ceiling",
            self._governance.reserve_cost,
            f"within ${limits.daily_cost_ceiling_usd} per day "
            f"(this purchase ${limits.cost_per_purchase_usd})",
        )
        return purchase

    def _guard_recipient(self, attempt: _Attempt, email: str) -> None:
        """The per-recipient limit, reported inside the rate_limit check (the checks stay six).
        A resumed attempt whose predecessor reached the cost ceiling took it already."""
        if attempt.checks.has("cost_ceiling"):
            return
        limits = self._governance.limits
        reserve = functools.partial(self._governance.reserve_recipient, email)
        if self._reserve(attempt, "rate_limit", reserve) and attempt.checks.result("rate_limit") == "pass":
            attempt.checks.record(
                "rate_limit",
                "pass",
                f"within {limits.rate_limit_per_hour} per hour from this client and "
                f"{limits.recipient_limit_per_day} per day to this recipient",
            )

    def _take_key(self, attempt: _Attempt) -> None:
        """Claim the vacant key with the guards just passed. Another request that took it in
        the meantime makes this one a 409 (its reservations are given back)."""
        vacant = attempt.vacant
        if vacant is None:
            return
        try:
            claimed = self._idempotency.take(
                vacant, attempt.fingerprint, attempt.receipt_id, attempt.progress()
            )
        except StoreUnavailable as exc:
            if self._config.idempotency_fail_open:
                self._key_store_down(attempt, exc)
                attempt.vacant = None
                return
            # The claim, with these reservations on it, may have landed: keep them counted.
            attempt.claim_uncertain = True
            message = (
                "the idempotency store did not answer as this key was claimed; nothing was sent. "
                "A retry with the key answers 409 until the claim's lease ends if the claim landed, "
                "then resumes"
            )
            attempt.checks.record("idempotency", "fail", message)
            raise StorageDown(message, retry_after=5) from None
        if claimed is None:
            for reservation in attempt.reservations:
                self._governance.release(reservation)
            attempt.reservations = []
            message = "a request with this idempotency key is already running; retry shortly"
            attempt.checks.record("idempotency", "fail", message)
            raise KeyInUse(message, retry_after=1)
        self._hold(attempt, claimed)

    def _guard(self, attempt: _Attempt, check: str, reserve: Callable[[], Reservation], within: str) -> None:
        """Take one governance reservation, unless a predecessor's is on the claim."""
        if not attempt.checks.has(check) and self._reserve(attempt, check, reserve):
            attempt.checks.record(check, "pass", within)

    def _reserve(self, attempt: _Attempt, check: str, reserve: Callable[[], Reservation]) -> bool:
        """Take a reservation, reported under `check`: a refusal fails the check (429); an
        unreachable counter store fails open and marks it `degraded` (False)."""
        try:
            attempt.reservations.append(reserve())
        except LimitExceeded as exc:
            attempt.checks.record(check, "fail", exc.message)
            raise
        except StoreUnavailable as exc:
            log.warning("%s not enforced: %s", check, exc)
            attempt.checks.record(check, "degraded", "counter store unreachable; not enforced")
            return False
        return True

    def _check_shape(self, attempt: _Attempt) -> None:
        try:
            check_shape(attempt.call.arguments)
        except StorefrontError as exc:
            attempt.checks.record("input_schema", "fail", exc.message)
            raise

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
                "the store is not configured: "
                + ", ".join(self._config.missing_secrets)
                + " unset, not resolved from Key Vault, or refused as an example or weak value; its health"
                + " check names each and why"
            )
        signer = TokenSigner(
            self._keys(), self._config.public_base_url, self._config.download_token_ttl_seconds, self._clock
        )
        checks = attempt.checks
        self._check_recordable(attempt)
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
        if not checks.has("fulfillment_email"):
            self._checkpoint(attempt)
            self._send(attempt, purchase)
        self._issue(attempt)
        self._checkpoint(attempt)

    def _check_recordable(self, attempt: _Attempt) -> None:
        """An unkeyed purchase whose guards found the Table down sends nothing unless Blob can
        take its receipt: with both stores down, a receipt answered 200 could not be on record."""
        if attempt.keyed or "degraded" not in (
            attempt.checks.result(c) for c in ("rate_limit", "cost_ceiling")
        ):
            return
        try:
            self._receipts.probe()
        except StoreUnavailable:
            raise StorageDown(
                "table and blob storage are both unreachable, so this purchase could not be recorded; "
                "nothing was sent",
                retry_after=5,
            ) from None

    def _send(self, attempt: _Attempt, purchase: PurchaseInput) -> None:
        checks = attempt.checks
        attempt.email_attempted = True
        try:
            earlier = self._earlier_send(attempt, purchase)
            if earlier is not None:
                detail = f"already accepted by Brevo as {earlier} before a restart (found in its log)"
                checks.record("fulfillment_email", "pass", detail)
                return
            message_id = self._brevo.send_email(self._email(purchase, attempt), attempt.brevo_key)
        except StorefrontError as exc:
            checks.record("fulfillment_email", "fail", exc.message)
            raise
        if message_id is None:
            checks.record("fulfillment_email", "pass", "already accepted by Brevo before a restart")
        else:
            checks.record("fulfillment_email", "pass", f"accepted by Brevo as {message_id}")

    def _issue(self, attempt: _Attempt) -> None:
        """Issue the receipt once the email is recorded. A taker whose predecessor may have
        issued one already (the recovery point with it never landed) adopts that receipt when
        it is queued for repair; one already in Blob wins at the write-once write."""
        if attempt.receipt_body is not None:
            return
        if attempt.resumed:
            try:
                queued = self._repairs.queued(attempt.receipt_id)
            except StoreUnavailable:
                raise StorageDown(
                    "the receipt an earlier attempt may have issued cannot be looked up yet; retry "
                    "with the same idempotency key",
                    retry_after=5,
                ) from None
            if queued is not None:
                attempt.receipt_body, attempt.inherited_receipt = queued, True
                return
        attempt.receipt_body = encode(self._signed(self._receipt(attempt, "fulfilled", None)))

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
        """Record a recovery point on the claim. Losing the claim stops the run (409); a store
        outage does not: the lease is still ours, and the email's Brevo key and tag protect a
        resend by whoever resumes."""
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
            log.warning("recovery point not recorded (%s); the lease still holds the key", exc)

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
        the caller caused the failure (bad input counts against the rate limit). The idempotency
        check then says what a retry with the key will do."""
        # A resumed claim's predecessor may have sent the email without recording it: only
        # Brevo's log can tell, so such a claim is kept for the next taker, never deleted.
        sent = attempt.email_attempted or attempt.checks.has("fulfillment_email") or attempt.resumed
        released = not attempt.claim_uncertain
        if attempt.claim is not None:
            released = self._idempotency.release(attempt.claim, keep_progress=sent)
        if attempt.keyed and attempt.checks.result("idempotency") == "pass":
            if sent:
                retry = "key kept with its recovery points: a retry with it resumes and sends no second email"
            elif released:
                retry = "key not used: nothing was sent, so a retry with it runs the purchase again"
            else:
                retry = (
                    "key still held (the store did not confirm its release): nothing was sent; a retry "
                    "with it answers 409 until the lease ends, then resumes"
                )
            attempt.checks.record("idempotency", "pass", retry)
        # Once the email may have gone out, the purchase counts: the retry resumes without
        # taking the guards again, so the reservations stay. So do they while a claim that
        # records them may live on.
        if not sent and released and (exc.status >= 500 or isinstance(exc, LimitExceeded)):
            for reservation in attempt.reservations:
                self._governance.release(reservation)

    def _complete(self, attempt: _Attempt) -> Outcome:
        """Put the receipt on record, then complete the claim. A receipt that cannot be put on
        record is never answered 200 for a key (503: the retry gets the one receipt); an
        unkeyed purchase, whose email is out, still gets its receipt, and the failure is logged."""
        if attempt.receipt_body is None:
            self._issue(attempt)
        body = self._record(attempt)
        if body is None:
            if attempt.keyed:
                raise StorageDown(
                    "the bundle was sent, but its receipt could not be recorded yet; retry with the "
                    "same idempotency key to receive it",
                    retry_after=5,
                )
            log.error("receipt %s answered but not on record: both stores unreachable", attempt.receipt_id)
            return Outcome(200, attempt.receipt_body)
        if attempt.claim is not None:
            try:
                self._idempotency.complete(attempt.claim, body, not_after=self._token_expiry(attempt))
            except (ClaimLost, StoreUnavailable) as exc:
                log.warning("claim not completed (%s); a retry after the lease will finish it", exc)
        return Outcome(200, body)

    def _token_expiry(self, attempt: _Attempt) -> float | None:
        """When the emailed link dies: the token's expiry, which derives from the claim, so a
        taker that resumed with the receipt alone (and minted no token) knows it too."""
        if attempt.token is not None:
            return attempt.token.expires_at
        if attempt.claim is not None and attempt.claim.created_at:
            return int(attempt.claim.created_at) + self._config.download_token_ttl_seconds
        return None

    def _record(self, attempt: _Attempt) -> bytes | None:
        """The receipt as it stands on record, retrying within the configured patience; None
        when no store would take it."""
        deadline = time.monotonic() + self._config.record_patience_seconds
        pause = 0.1
        while True:
            body = self._record_once(attempt)
            if body is not None or time.monotonic() + pause > deadline:
                return body
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _record_once(self, attempt: _Attempt) -> bytes | None:
        """Blob (write-once: an earlier holder's bytes win; tagged until the repair timer has
        seen its ledger row) and the ledger row. When Blob is down, the bytes are queued for
        repair in the Table before the ledger row names them. A receipt that a taker issued
        itself goes nowhere before Blob confirms no earlier one exists."""
        receipt_id, body = attempt.receipt_id, attempt.receipt_body
        receipt = json.loads(body)
        try:
            stored = self._receipts.write_once(receipt_id, body, ledger_day=receipt["issued_at"][:10])
        except StoreUnavailable as exc:
            log.warning("receipt %s not in Blob yet: %s", receipt_id, exc)
            if attempt.resumed and not attempt.inherited_receipt:
                return None
            try:
                self._repairs.queue(receipt_id, body)
            except StoreUnavailable as exc:
                log.warning("receipt %s not queued for repair either: %s", receipt_id, exc)
                return None
        else:
            if stored != body:
                body, receipt = stored, json.loads(stored)
        try:
            self._ledger.record(receipt)
        except StoreUnavailable as exc:
            log.warning("receipt %s not in the ledger yet (the repair timer adds it): %s", receipt_id, exc)
        return body

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


def scoped_key_hash(hasher: Hasher, key: str, email: str) -> str:
    """Keys belong to the buyer: the same key under another email is another key, so nobody can
    squat on, or probe, someone else's key. Keys cannot hold NUL, so a scoped hash never equals
    the unscoped one that claims written before scoping carry."""
    return hasher.idempotency_key(f"{key}\x00{normalise_email(email)}")


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
