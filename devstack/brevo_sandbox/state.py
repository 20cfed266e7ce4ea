"""The sandbox's memory: contacts, captured emails, import processes, the account, faults
(``faults.FaultBook``), idempotency keys and counters.

One lock guards all of it, so concurrent requests are safe; nothing is written to disk. (The
rate limiter keeps its windows behind a lock of its own, in ``limits``.)
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from dataclasses import asdict, replace
from typing import Any

from devstack.brevo_sandbox.account import Account, refuse_send, spend
from devstack.brevo_sandbox.contacts import DUPLICATE_CONTACT, Contact, ContactRequest, merge_contact, touch
from devstack.brevo_sandbox.emails import (
    IDEMPOTENCY_WINDOW_SECONDS,
    MESSAGE_ID_DOMAIN,
    CapturedEmail,
    EmailRequest,
    extract_links,
)
from devstack.brevo_sandbox.faults import FaultBook
from devstack.brevo_sandbox.imports import ImportProcess, ImportRequest, created_attributes, merged_attributes
from devstack.brevo_sandbox.wire import BREVO_PATHS, ApiError, utc_now


class SandboxState:
    """Everything the sandbox remembers; every public method takes the lock, and so does every
    method of ``faults``, which shares it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.faults = FaultBook(self._lock)
        self._clear()

    def _clear(self) -> None:
        self._contacts: dict[str, Contact] = {}
        self._emails: list[CapturedEmail] = []
        self._processes: list[ImportProcess] = []
        self._account = Account()
        self.faults.clear_held()
        self._idempotency: dict[str, float] = {}
        self._requests = dict.fromkeys(BREVO_PATHS, 0)
        self._contact_upserts = 0
        self._emails_accepted = 0
        self._emails_rejected_duplicate = 0
        self._contacts_imported = 0
        self._next_list_id = 1
        self._contact_ids = itertools.count(1)
        self._email_ids = itertools.count(1)
        self._process_ids = itertools.count(1)

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
            return self._create_contact(req.email, dict(req.attributes), req.listIds).id

    def _create_contact(self, email: str, attributes: dict[str, Any], list_ids: list[int]) -> Contact:
        """Lock must be held."""
        now, lists = utc_now(), list(dict.fromkeys(list_ids))
        contact = Contact(next(self._contact_ids), email, attributes, lists, 1, now, now)
        self._contacts[email] = contact
        return contact

    def import_contacts(self, req: ImportRequest) -> int:
        """Apply an import at once; its process id."""
        with self._lock:
            list_ids = list(req.list_ids)
            if req.new_list is not None:
                seen = [i for c in self._contacts.values() for i in c.listIds] + list_ids
                list_id = max([self._next_list_id, *(i + 1 for i in seen)])
                self._next_list_id = list_id + 1
                list_ids.append(list_id)
            process = ImportProcess(next(self._process_ids), 0, 0, 0, req.invalid, req.duplicates, list_ids)
            for entry in req.entries:
                existing = self._contacts.get(entry.email)
                if existing is None:
                    self._create_contact(entry.email, created_attributes(entry.attributes), list_ids)
                    process.created += 1
                elif not req.update_existing:
                    process.unchanged += 1
                else:
                    attributes = merged_attributes(existing.attributes, entry.attributes, req.empty_erases)
                    existing.attributes = attributes
                    existing.listIds = list(dict.fromkeys(existing.listIds + list_ids))
                    touch(existing)
                    process.updated += 1
            self._contacts_imported += process.created
            self._processes.append(process)
            return process.id

    def process(self, process_id: int) -> ImportProcess | None:
        with self._lock:
            return next((replace(p) for p in self._processes if p.id == process_id), None)

    def processes(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(p) for p in self._processes]

    def capture_email(self, req: EmailRequest) -> CapturedEmail:
        """Capture an email, or refuse it as Brevo would: a repeated idempotency key, then the
        account (activation, credits). A refusal remembers nothing."""
        with self._lock:
            key = req.idempotency_key
            if key is not None and self._seen_recently(key.lower()):
                self._emails_rejected_duplicate += 1
                raise ApiError(
                    400, "duplicate_parameter", "An email with this idempotencyKey was already accepted"
                )
            refuse_send(self._account, len(req.to))
            if key is not None:
                self._idempotency[key.lower()] = time.monotonic()
            spend(self._account, len(req.to))
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
        """Whether *key* was accepted within the window; lock must be held."""
        horizon = time.monotonic() - IDEMPOTENCY_WINDOW_SECONDS
        self._idempotency = {k: t for k, t in self._idempotency.items() if t > horizon}
        return key in self._idempotency

    def forget_idempotency_keys(self) -> None:
        """Forget every remembered idempotency key, as Brevo does once its window has passed."""
        with self._lock:
            self._idempotency.clear()

    def account(self) -> dict[str, Any]:
        with self._lock:
            return asdict(self._account)

    def set_account(self, account: Account) -> None:
        with self._lock:
            self._account = account

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
                "imports": len(self._processes),
                "contacts_imported": self._contacts_imported,
            }
