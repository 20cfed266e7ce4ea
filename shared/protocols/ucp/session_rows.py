"""UCP checkout sessions as sealed rows of the checkout table: read (another platform's session
is not found; one past its expiry is canceled on the way), changed by a conditional write over
the row as read, so two requests on one session never both win, and reaped when they have ended."""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import replace

from shared.protocols.http import Answer, json_answer
from shared.protocols.ucp.checkout import CHECKOUT_ID, OPEN, TERMINAL, Session, checkout, not_found
from shared.protocols.ucp.wire import protocol_error
from shared.seams.checkout_store import CheckoutStore, Row, RowChanged

KIND = "checkout"
RETENTION_SECONDS = 30 * 86400  # how long a completed session (and its order) is kept
ABANDONED_SECONDS = 2 * 86400  # how long any other is kept after it expires or ends
ATTEMPTS = 3


class SessionRows:
    def __init__(
        self, store: CheckoutStore, clock: Callable[[], float] = time.time, links: tuple[dict, ...] = ()
    ):
        """`links`: the store's legal links, which every session read shows."""
        self._store = store
        self.clock = clock
        self._links = links

    def insert(self, session: Session) -> bool:
        """Write a new session; False when one with its id exists."""
        return self._store.create(self.row(session)) is not None

    def replace(self, session: Session, row: Row) -> Row:
        """Write `session` over `row` as it was read; RowChanged when it has changed since."""
        return self._store.replace(replace(self.row(session), etag=row.etag))

    def reap(self) -> int:
        return self._store.reap(self.clock())

    def load(self, platform: str, checkout_id: str) -> tuple[Session, Row] | None:
        """The platform's session and its row; None when there is none (or it is another
        platform's). A session past its expiry is canceled on the way (and kept so)."""
        if not CHECKOUT_ID.fullmatch(checkout_id):
            return None
        row = self._store.get(checkout_id, KIND)
        if row is None:
            return None
        session = replace(Session.from_record(row.record), links=self._links)
        if not hmac.compare_digest(session.platform, platform):
            return None
        if session.expired(self.clock()):
            session.status = "canceled"
            try:
                row = self.replace(session, row)
            except RowChanged:
                return self.load(platform, checkout_id)
        return session, row

    def change(
        self,
        platform: str,
        checkout_id: str,
        change: Callable[[Session], Answer | None],
        notes: tuple[dict, ...] = (),
    ) -> Answer:
        for _ in range(ATTEMPTS):
            loaded = self.load(platform, checkout_id)
            if loaded is None:
                return json_answer(200, not_found())
            session, row = loaded
            answered = change(session)
            if answered is not None:
                return answered
            try:
                self.replace(session, row)
            except RowChanged:
                continue
            return json_answer(200, checkout(session, notes))
        return busy()

    def hold(self, platform: str, checkout_id: str, resume_within: float) -> Session | Answer:
        """The session, held as `complete_in_progress` for this complete; or the answer that ends
        the complete here (no session, a terminal or incomplete one)."""
        for _ in range(ATTEMPTS):
            loaded = self.load(platform, checkout_id)
            if loaded is None:
                return json_answer(200, not_found())
            session, row = loaded
            if session.status in TERMINAL:
                return not_modifiable(session)
            resuming = session.status == "complete_in_progress" and bool(session.lines)
            if resuming and self.clock() - session.held_at >= resume_within:
                # Its purchase key may be gone by now: a purchase run again could email again.
                return protocol_error(
                    409,
                    "checkout_not_modifiable",
                    "this checkout was held too long to finish safely (its bundle may have been sent): "
                    "start a new checkout",
                )
            if not resuming and session.status != "ready_for_complete":
                return json_answer(200, checkout(session))  # incomplete: its messages say why
            if not resuming:  # a complete that did not finish is resumed: its purchase key stays
                session.status, session.refusal, session.held_at = (
                    "complete_in_progress",
                    None,
                    self.clock(),
                )
            session.hold = secrets.token_hex(8)  # this complete's: an earlier one cannot settle it
            try:
                self.replace(session, row)
            except RowChanged:
                continue
            return session
        return busy()

    def row(self, session: Session) -> Row:
        """The session's row, kept 30 days once completed (its order is read by it), else two days
        past its end: sessions anyone can create cost little to keep."""
        ends = session.expires_at if session.status in OPEN else self.clock()
        kept = RETENTION_SECONDS if session.status == "completed" else ABANDONED_SECONDS
        return Row(session.id, KIND, session.record(), keep_until=ends + kept)


def not_modifiable(session: Session) -> Answer:
    return protocol_error(
        409, "checkout_not_modifiable", f"the checkout is {session.status} and can no longer change"
    )


def busy() -> Answer:
    return protocol_error(
        409, "request_in_progress", "the checkout kept changing under this request; retry", retry_after=1
    )
