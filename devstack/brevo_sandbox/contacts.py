"""Contacts (``POST /v3/contacts``): the contact record, the request Brevo accepts, and how an
upsert merges into an existing contact.

Record fields use Brevo's camelCase names so ``asdict()`` is already the wire format. Beside
them the sandbox keeps its own bookkeeping: ``upserts`` (writes by any endpoint, the creation
included), ``modifications`` (writes after the creation) and the times of both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devstack.brevo_sandbox.wire import invalid, is_email, is_int, object_field, utc_now

DUPLICATE_CONTACT = "Unable to create contact, email is already associated with another Contact"


@dataclass
class Contact:
    id: int
    email: str
    attributes: dict[str, Any]
    listIds: list[int]
    upserts: int
    created_at: str
    updated_at: str
    modifications: int = 0


@dataclass
class ContactRequest:
    email: str
    attributes: dict[str, Any]
    listIds: list[int]
    updateEnabled: bool


def parse_contact_request(payload: dict[str, Any]) -> ContactRequest:
    email = payload.get("email")
    if not is_email(email):
        raise invalid("email is missing or is not a valid email address")
    list_ids = payload.get("listIds") or []
    if not isinstance(list_ids, list) or not all(is_int(i) for i in list_ids):
        raise invalid("listIds must be a list of integers")
    update_enabled = payload.get("updateEnabled", False)
    if not isinstance(update_enabled, bool):
        raise invalid("updateEnabled must be a boolean")
    attributes = object_field(payload, "attributes")
    return ContactRequest(email.lower(), attributes, list_ids, update_enabled)


def merge_contact(contact: Contact, req: ContactRequest) -> None:
    contact.attributes.update(req.attributes)
    contact.listIds = list(dict.fromkeys(contact.listIds + req.listIds))
    touch(contact)


def touch(contact: Contact) -> None:
    """Count a write after the contact's creation."""
    contact.upserts += 1
    contact.modifications += 1
    contact.updated_at = utc_now()
