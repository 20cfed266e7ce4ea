"""The purchase as one operation of the exactly-once executor (`shared.exactly_once.executor`):

    govern → validate (inside govern) → claim taken → contact → token → [recovery point "email"]
    → send → issue → [recovery point "receipt": the receipt rides on the claim] → record

Its steps are in `guards` (govern, validate), `fulfillment` (contact, token, send) and
`receipt.issue` (issue, record). This class reads the key, words what the executor says in the
receipt's idempotency check, and hands the executor what it saves at each recovery point
(docs/idempotency.md#how-it-works: the checks, the reservations, the receipt).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from shared.config.errors import StorefrontError
from shared.exactly_once import executor as once
from shared.purchase import fulfillment
from shared.purchase.call import (
    Attempt,
    Outcome,
    PurchaseCall,
    PurchaseServices,
    brevo_idempotency_key,
    scoped_key_hash,
    token_id,
)
from shared.purchase.guards import Guards, check_input_shape
from shared.purchase.receipt.issue import Issuer
from shared.purchase.schema import PurchaseInput, canonical_request, read_idempotency_key
from shared.seams.claims import Claim
from shared.seams.counters import Reservation

log = logging.getLogger("storefront.purchase")

WORDS: dict[once.Turn, str] = {
    once.Turn.UNKEYED: "no key supplied; a retry would buy again",
    once.Turn.VACANT: "key free; it is claimed once the guards pass",
    once.Turn.CLAIMED: "key claimed; a retry with it replays this receipt",
    once.Turn.RESUMED: "key claimed after an interrupted attempt; resumed from its recovery points",
    once.Turn.IN_PROGRESS: "a request with this idempotency key is still running; retry shortly",
    once.Turn.REUSED: "this idempotency key was already used with a different request",
    once.Turn.STORE_DOWN: (
        "the idempotency store is unreachable, so this key cannot be protected; nothing was sent"
    ),
    once.Turn.UNPROTECTED: "store unreachable; retries are not protected",
    once.Turn.CLAIM_UNCERTAIN: (
        "the idempotency store did not answer as this key was claimed; nothing was sent. "
        "A retry with the key answers 409 until the claim's lease ends if the claim landed, "
        "then resumes"
    ),
    once.Turn.RACED: "a request with this idempotency key is already running; retry shortly",
    once.Turn.TAKEN_OVER: "another request took over this idempotency key; retry shortly",
    once.Turn.UNRECORDED: (
        "the bundle was sent, but its receipt could not be recorded yet; retry with the "
        "same idempotency key to receive it"
    ),
    once.Turn.KEPT: "key kept with its recovery points: a retry with it resumes and sends no second email",
    once.Turn.RELEASED: "key not used: nothing was sent, so a retry with it runs the purchase again",
    once.Turn.HELD: (
        "key still held (the store did not confirm its release): nothing was sent; a retry "
        "with it answers 409 until the lease ends, then resumes"
    ),
}


class PurchaseOperation(once.Operation[Reservation]):
    """One purchase, run by `shared.exactly_once.executor.ExactlyOnce`."""

    recovery_points = ("email", "receipt")

    def __init__(self, call: PurchaseCall, services: PurchaseServices, guards: Guards, issuer: Issuer):
        self.attempt = Attempt(call)
        self._s = services
        self._guards = guards
        self._issuer = issuer

    @property
    def result_id(self) -> str:
        return self.attempt.receipt_id

    def key(self) -> once.Key | None:
        """The idempotency key (argument or header), scoped to the buyer; None without one."""
        call = self.attempt.call
        try:
            key = read_idempotency_key(call.arguments, call.header_key)
        except StorefrontError as exc:
            self.attempt.checks.set("idempotency", "fail", exc.message)
            raise
        if key is None:
            return None
        email = call.arguments.get("email") if isinstance(call.arguments, dict) else None
        hasher = self._s.hasher
        scoped = scoped_key_hash(hasher, key, email if isinstance(email, str) else "")
        return once.Key(scoped, legacy_hash=hasher.idempotency_key(key))

    def say(self, turn: once.Turn, result: str | None = None) -> str:
        """The turn in the purchase's words (`WORDS`), noted as the receipt's idempotency check."""
        detail = WORDS[turn]
        if result is not None:
            self.attempt.checks.set("idempotency", result, detail)
        if turn is once.Turn.KEPT:
            self.attempt.may_have_sent = True
        return detail

    def fingerprint(self) -> str:
        return self._s.hasher.request(canonical_request(self.attempt.call.arguments))

    def reused(self) -> None:
        check_input_shape(self.attempt)

    def hold(self, claim: Claim) -> None:
        attempt = self.attempt
        attempt.receipt_id = claim.result_id
        attempt.brevo_key = brevo_idempotency_key(claim)
        attempt.token_id = token_id(claim)
        attempt.claimed_at = claim.created_at

    def resume(self, progress: dict, result: bytes | None) -> None:
        attempt = self.attempt
        attempt.resumed = True
        attempt.checks.restore(progress.get("checks", {}))
        attempt.reservations = [Reservation(p, r, int(n)) for p, r, n in progress.get("reservations", [])]
        if result is not None:
            attempt.receipt_body, attempt.inherited_receipt = result, True

    def guard(self) -> None:
        self._guards.govern(self.attempt)

    def reservations(self) -> Sequence[Reservation]:
        return self.attempt.reservations

    def give_back(self, reservation: Reservation) -> None:
        self._guards.give_back(reservation)

    def perform(self, run: once.Run) -> None:
        attempt, services = self.attempt, self._s
        purchase = self._validated()
        fulfillment.configured(services.config)
        signer = fulfillment.signer(services)
        fulfillment.check_recordable(services, attempt, run.keyed)
        fulfillment.contact(services, attempt, purchase)
        attempt.token = token = fulfillment.token(signer, attempt, purchase)
        if not attempt.checks.has("fulfillment_email"):
            run.reached("email")
            fulfillment.send(services, attempt, purchase, token)
        self._issuer.issue(attempt)
        run.reached("receipt")

    def _validated(self) -> PurchaseInput:
        """The purchase as the guards validated it: the executor runs `perform` after `guard`."""
        if self.attempt.validated is None:
            raise ValueError("the purchase's effects ran before its guards validated it")
        return self.attempt.validated.purchase

    def progress(self) -> dict:
        attempt = self.attempt
        return {
            "checks": attempt.checks.recorded(),
            "reservations": [[r.partition, r.row, r.amount] for r in attempt.reservations],
        }

    def result(self) -> bytes | None:
        return self.attempt.receipt_body

    def effects_may_have_left(self) -> bool:
        """An email may be out: this run tried to send one (and Brevo did not refuse it outright),
        or an earlier run's progress says it went."""
        attempt = self.attempt
        return attempt.email_attempted or attempt.checks.result("fulfillment_email") == "pass"

    def record(self) -> bytes | None:
        return self._issuer.record(self.attempt)

    def replay_until(self, claim: Claim) -> float | None:
        """When the emailed link dies: the token's expiry, which derives from the claim, so a
        taker that resumed with the receipt alone (and minted no token) knows it too."""
        if self.attempt.token is not None:
            return self.attempt.token.expires_at
        if claim.created_at:
            return int(claim.created_at) + self._s.config.download_token_ttl_seconds
        return None

    def answer(self, done: once.Done) -> Outcome:
        if not done.recorded:
            log.error(
                "receipt %s answered but not on record: both stores unreachable", self.attempt.receipt_id
            )
        return Outcome(200, done.body, replayed=done.replayed)

    def refusal(self, exc: StorefrontError) -> Outcome:
        return self._issuer.refusal(self.attempt, exc)
