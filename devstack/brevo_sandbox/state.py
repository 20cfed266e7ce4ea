"""The sandbox's memory: contacts, captured emails, faults, idempotency keys and counters.

One lock guards all of it, so concurrent requests are safe; nothing is written to disk.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import asdict, replace
from typing import Any

from devstack.brevo_sandbox.contacts import DUPLICATE_CONTACT, Contact, ContactRequest, merge_contact
from devstack.brevo_sandbox.emails import (
    IDEMPOTENCY_WINDOW_SECONDS,
    MESSAGE_ID_DOMAIN,
    CapturedEmail,
    EmailRequest,
    extract_links,
)
from devstack.brevo_sandbox.faults import Fault, fault_matches
from devstack.brevo_sandbox.wire import BREVO_PATHS, ApiError, utc_now


class SandboxState:
    """Everything the sandbox remembers; every public method takes the lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self._contacts: dict[str, Contact] = {}
        self._emails: list[CapturedEmail] = []
        self._faults: list[Fault] = []
        self._idempotency: dict[str, float] = {}
        self._requests = dict.fromkeys(BREVO_PATHS, 0)
        self._contact_upserts = 0
        self._emails_accepted = 0
        self._emails_rejected_duplicate = 0
        self._contact_ids = itertools.count(1)
        self._email_ids = itertools.count(1)
        self._fault_ids = itertools.count(1)

    def reset(self) -> None:
        with self._lock:
            self._clear()

    def count_request(self, path: str) -> None:
        with self._lock:
            self._requests[path] += 1

    def upsert_contact(self, req: ContactRequest) -> int | None:
        """Return the new contact's id, or None when an existing one was updated."""
        with self._lock:
            existing = self._contacts.get(req.email)
            if existing is not None and not req.updateEnabled:
                # Brevo's answer: nothing about the contact changes, not even its lists.
                duplicate = {"duplicate_identifiers": ["email"]}
                raise ApiError(400, "duplicate_parameter", DUPLICATE_CONTACT, metadata=duplicate)
            self._contact_upserts += 1
            if existing is not None:
                merge_contact(existing, req)
                return None
            now = utc_now()
            list_ids = list(dict.fromkeys(req.listIds))
            contact = Contact(next(self._contact_ids), req.email, dict(req.attributes), list_ids, 1, now, now)
            self._contacts[req.email] = contact
            return contact.id

    def capture_email(self, req: EmailRequest) -> CapturedEmail:
        with self._lock:
            key = req.idempotency_key
            if key is not None and self._seen_recently(key.lower()):
                self._emails_rejected_duplicate += 1
                raise ApiError(
                    400, "duplicate_parameter", "An email with this idempotencyKey was already accepted"
                )
            email = CapturedEmail(
                id=next(self._email_ids),
                messageId=f"<{uuid.uuid4()}@{MESSAGE_ID_DOMAIN}>",
                received_at=utc_now(),
                links=extract_links(req.htmlContent, req.textContent),
                **asdict(req),
            )
            self._emails.append(email)
            self._emails_accepted += 1
            return email

    def _seen_recently(self, key: str) -> bool:
        """Check and remember *key*; lock must be held."""
        now = time.monotonic()
        horizon = now - IDEMPOTENCY_WINDOW_SECONDS
        self._idempotency = {k: t for k, t in self._idempotency.items() if t > horizon}
        if key in self._idempotency:
            return True
        self._idempotency[key] = now
        return False

    def forget_idempotency_keys(self) -> None:
        """Forget every remembered idempotency key, as Brevo does once its window has passed."""
        with self._lock:
            self._idempotency.clear()

    def add_fault(self, fault: Fault) -> int:
        with self._lock:
            fault = replace(fault, id=next(self._fault_ids))
            self._faults.append(fault)
            return fault.id

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def faults(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(f) for f in self._faults]

    def take_fault(self, path: str, body: bytes) -> Fault | None:
        """Consume one use of the oldest fault matching this request (its body, or its query
        string for a GET), if any."""
        with self._lock:
            for fault in self._faults:
                if fault.path == path and fault_matches(fault, body):
                    fault.times -= 1
                    if fault.times == 0:
                        self._faults.remove(fault)
                    return replace(fault)
            return None

    def emails(self, to: str | None = None) -> list[CapturedEmail]:
        # Captured emails are never mutated, so handing out the objects is safe.
        with self._lock:
            emails = list(self._emails)
        if to is None:
            return emails
        return [e for e in emails if any(r["email"].lower() == to.lower() for r in e.to)]

    def email(self, email_id: int) -> CapturedEmail | None:
        with self._lock:
            return next((e for e in self._emails if e.id == email_id), None)

    def contacts(self, email: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            contacts = [asdict(c) for c in self._contacts.values()]
        if email is None:
            return contacts
        return [c for c in contacts if c["email"] == email.lower()]

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "requests": dict(self._requests),
                "contact_upserts": self._contact_upserts,
                "emails_accepted": self._emails_accepted,
                "emails_rejected_duplicate": self._emails_rejected_duplicate,
            }
