"""UCP checkout sessions (UCP 2026-08-25, shopping/checkout/index.md "Operations") and their
completion by the store's one purchase. `complete` holds the session (`complete_in_progress`,
which no update or cancel changes), then runs the purchase the other doors run, keyed by the
checkout's id: the same guards and limits, the exactly-once executor, one email and one signed
receipt, whatever retries, races or crashes come. A complete that finds the session held by one
that died resumes it, and the purchase replays its receipt. The checkout's order is that receipt.
docs/ucp.md gives the rules a business chooses, with the spec's sections."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from shared.config.hashing import Hasher
from shared.protocols.http import Answer, json_answer
from shared.protocols.ucp import orders
from shared.protocols.ucp.checkout import (
    TERMINAL,
    TTL_SECONDS,
    Session,
    checkout,
    error,
    full_name,
    not_found,
    read_request,
)
from shared.protocols.ucp.orders import order_id
from shared.protocols.ucp.session_rows import SessionRows, not_modifiable
from shared.protocols.ucp.wire import protocol_error
from shared.purchase.call import PurchaseCall
from shared.purchase.storefront import Storefront
from shared.seams.checkout_store import CheckoutStore

if TYPE_CHECKING:
    from shared.protocols.ucp.webhooks import Webhooks

PATHS = {"invalid_email": "$.buyer.email", "invalid_name": "$.buyer", "unknown_bundle": "$.line_items"}


class CheckoutSessions:
    def __init__(
        self,
        store: CheckoutStore,
        storefront: Storefront,
        hasher: Hasher,
        *,
        webhooks: Webhooks | None = None,
        resume_within: float = 23 * 3600,
        links: tuple[dict, ...] = (),
        clock: Callable[[], float] = time.time,
    ):
        """`resume_within`: how long after a complete first held a session another may resume
        it: less than the purchase key lives, so a resumed purchase always finds its key."""
        self._rows = SessionRows(store, clock, links)
        self._links = links
        self._storefront = storefront
        self._hasher = hasher
        self._webhooks = webhooks
        self._resume_within = resume_within

    def platform_id(self, profile_url: str) -> str:
        """What a session keeps of the platform that created it: a keyed hash of its profile URL."""
        return self._hasher.platform(profile_url)

    def seed(self, profile_url: str, key: str | None) -> str | None:
        """What a create's checkout id is made from, when its Idempotency-Key is sent."""
        return self._hasher.ucp_key(f"checkout-id\x00{profile_url}\x00{key}") if key else None

    def create(self, platform: str, body: object, seed: str | None) -> Answer:
        """201 with the new session; `seed` (from the request's Idempotency-Key) makes its id, so
        a create run again after a lost answer finds the session it made instead of another."""
        request = read_request(body)
        if not request.lines:
            messages = [
                error("item_unavailable", note["content"], severity="unrecoverable") for note in request.notes
            ]
            return json_answer(200, {**not_found(), "messages": messages})
        now = self._rows.clock()
        session = Session(
            id=_checkout_id(seed),
            platform=platform,
            status="incomplete",
            lines=list(request.lines),
            buyer=dict(request.buyer),
            created_at=now,
            expires_at=now + TTL_SECONDS,
            links=self._links,
        )
        session.apply(request)
        if not self._rows.insert(session):  # the same seed ran before: answer with what it made
            loaded = self._rows.load(platform, session.id)
            if loaded is None:
                return protocol_error(409, "checkout_exists", "a checkout session with this id exists")
            session = loaded[0]
        return json_answer(201, checkout(session, request.notes))

    def get(self, platform: str, checkout_id: str) -> Answer:
        loaded = self._rows.load(platform, checkout_id)
        if loaded is None:
            return json_answer(200, not_found())
        return json_answer(200, checkout(loaded[0]))

    def update(self, platform: str, checkout_id: str, body: object) -> Answer:
        """A full replacement of the lines and the buyer (checkout/index.md "Update Checkout")."""
        request = read_request(body)

        def change(session: Session) -> Answer | None:
            if session.status in TERMINAL:
                return not_modifiable(session)
            if session.status == "complete_in_progress":  # "Accepted completion": left unchanged
                held = error("complete_in_progress", "the checkout is being completed and cannot change now")
                return json_answer(200, checkout(session, (held,)))
            session.apply(request)
            return None

        return self._rows.change(platform, checkout_id, change, request.notes)

    def cancel(self, platform: str, checkout_id: str) -> Answer:
        def change(session: Session) -> Answer | None:
            if session.status in TERMINAL:
                return not_modifiable(session)
            if session.status == "complete_in_progress":
                return protocol_error(
                    409, "checkout_not_modifiable", "the checkout is being completed and cannot be canceled"
                )
            session.status = "canceled"
            return None

        return self._rows.change(platform, checkout_id, change)

    def complete(
        self,
        platform: str,
        checkout_id: str,
        body: object,
        call: PurchaseCall,
        webhook_url: str | None = None,
    ) -> Answer:
        """Complete a `ready_for_complete` session: the purchase, then `completed` with its order,
        whose event goes to `webhook_url` (queued before the purchase runs) when there is one."""
        refused = _payment_refusal(body)
        if isinstance(refused, Answer):
            return refused
        if refused is not None:  # more than one instrument: the checkout, unchanged, says why
            loaded = self._rows.load(platform, checkout_id)
            return json_answer(200, checkout(loaded[0], (refused,)) if loaded else not_found())
        held = self._rows.hold(platform, checkout_id, self._resume_within)
        if isinstance(held, Answer):
            return held
        session = held
        if webhook_url and self._webhooks:
            self._webhooks.queue(platform, session.id, webhook_url)
        line = session.lines[0]
        arguments = {
            "email": session.buyer.get("email", "").strip(),
            "name": full_name(session.buyer),
            "bundle_id": line.bundle.id,
            "idempotency_key": f"ucp.{session.id}",
        }
        outcome = self._storefront.purchase(replace(call, arguments=arguments, header_key=None))
        receipt = _document(outcome.body)
        if outcome.status == 200:
            order = {
                "id": order_id(session.id),
                "label": str(receipt.get("receipt_id", "")),
                "permalink_url": str(receipt.get("receipt_url", "")),
            }
            answer = self._settle(platform, checkout_id, "completed", session.hold, order=order)
            if webhook_url and self._webhooks and answer.status == 200:
                self._webhooks.send(session.id)
            return answer
        found = receipt.get("error")
        problem: dict = found if isinstance(found, dict) else {}
        code = str(problem.get("code") or "purchase_refused")
        content = str(problem.get("message") or "the purchase was refused")
        if outcome.status == 422:
            refusal = error(code, content, PATHS.get(code))
            return self._settle(platform, checkout_id, "incomplete", session.hold, refusal=refusal)
        if outcome.status == 409:  # the purchase is still running under the checkout's key: stay held
            content = "another request is completing this checkout; GET it, or retry after a moment"
            return protocol_error(409, "complete_in_progress", content, retry_after=outcome.retry_after or 1)
        if outcome.may_have_sent:  # held: only a complete to the same buyer may finish it
            content += "; the checkout stays held: complete it again, with any key, to finish it"
        else:
            self._settle(platform, checkout_id, "ready_for_complete", session.hold)
        return protocol_error(outcome.status, code, content, retry_after=outcome.retry_after)

    def _settle(
        self,
        platform: str,
        checkout_id: str,
        status: str,
        hold: str,
        *,
        order: dict | None = None,
        refusal: dict | None = None,
    ) -> Answer:
        """Move a held session on to `status` once its purchase has answered. A purchase that
        failed moves it only while this complete still holds it: one that took the session over
        since may be sending. A purchase that succeeded completes it whoever holds it (every
        purchase of the checkout is the one purchase under its key)."""

        def change(session: Session) -> Answer | None:
            if session.status == "complete_in_progress" and status != "completed" and session.hold != hold:
                return json_answer(200, checkout(session))  # another complete holds it now
            if session.status != "complete_in_progress":  # another complete settled it first
                return (
                    json_answer(200, checkout(session))
                    if session.status == status
                    else not_modifiable(session)
                )
            session.status, session.order, session.refusal = status, order, refusal
            return None

        return self._rows.change(platform, checkout_id, change)

    def reap(self) -> int:
        return self._rows.reap()

    def order(self, platform: str, order: str) -> dict:
        """The order entity of the platform's completed checkout, or the order error response."""
        loaded = self._rows.load(platform, orders.checkout_id(order))
        if loaded is None or loaded[0].status != "completed":
            return orders.not_found()
        return orders.entity(loaded[0])


def _checkout_id(seed: str | None) -> str:
    raw = hashlib.sha256(seed.encode()).digest()[:16] if seed else secrets.token_bytes(16)
    return "chk_" + base64.b32encode(raw).decode().rstrip("=").lower()


def _payment_refusal(body: object) -> Answer | dict | None:
    """A complete carries `payment` (checkout.json: required on complete): a 400 without one. A
    free order needs no instrument: none or one is taken and ignored (never read, kept or
    echoed); more is a recoverable `payment_failed`, as UCP allows one instrument per submission
    (overview "Instrument Cardinality")."""
    payment = body.get("payment") if isinstance(body, dict) else None
    if not isinstance(payment, dict):
        return protocol_error(
            400, "invalid_request", "a complete request needs a payment object, {} for a free order"
        )
    instruments = payment.get("instruments", [])
    if not isinstance(instruments, list):
        return protocol_error(400, "invalid_request", "payment.instruments must be a list")
    if len(instruments) > 1:
        content = "a submission carries at most one payment instrument; a free order needs none"
        return error("payment_failed", content, "$.payment.instruments")
    return None


def _document(body: bytes) -> dict:
    try:
        found = json.loads(body)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}
