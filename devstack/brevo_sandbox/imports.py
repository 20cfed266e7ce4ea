"""Contact import (``POST /v3/contacts/import``, developers.brevo.com/reference/import-contacts):
the request Brevo accepts, how an imported contact merges into one that exists, and the process
record the import leaves behind (``GET /v3/processes/{id}``). The sandbox finishes an import
before its 202, imports ``jsonBody`` only, and skips and reports invalid entries as Brevo does;
docs/development.md#brevo-sandbox has the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devstack.brevo_sandbox.wire import ApiError, invalid, is_email, is_int, missing

# "Maximum allowed json body size is 10MB" (Brevo recommends staying around 8 MB).
IMPORT_MAX_BYTES = 10 * 1000 * 1000
PROCESS_NAME = "IMPORTUSER"
IGNORED_FLAGS = ("disableNotification", "emailBlacklist", "smsBlacklist")


@dataclass
class ImportEntry:
    email: str
    attributes: dict[str, Any]


@dataclass
class ImportRequest:
    entries: list[ImportEntry]
    invalid: int
    duplicates: int
    list_ids: list[int]
    new_list: str | None
    update_existing: bool
    empty_erases: bool


@dataclass
class ImportProcess:
    """What one import did; ``GET /v3/processes/{id}`` shows ``id``, ``name`` and ``status``, and
    ``/_sandbox/imports`` the whole report."""

    id: int
    created: int
    updated: int
    unchanged: int
    invalid: int
    duplicates: int
    listIds: list[int] = field(default_factory=list)
    name: str = PROCESS_NAME
    status: str = "completed"

    def brevo_view(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status}


def too_large() -> ApiError:
    return ApiError(413, "payload_too_large", "jsonBody is larger than the 10MB an import accepts")


def _flag(payload: dict[str, Any], key: str, default: bool) -> bool:
    value = payload.get(key, default)
    if not isinstance(value, bool):
        raise invalid(f"{key} must be a boolean")
    return value


def _list_ids(payload: dict[str, Any]) -> tuple[list[int], str | None]:
    list_ids = payload.get("listIds")
    new_list = payload.get("newList")
    if new_list is not None:
        if not isinstance(new_list, dict) or not isinstance(new_list.get("listName"), str):
            raise invalid("newList must be an object with a listName")
        if not new_list["listName"].strip():
            raise invalid("newList.listName must not be empty")
        folder = new_list.get("folderId")
        if folder is not None and (not is_int(folder) or folder < 1):
            raise invalid("newList.folderId must be a positive integer")
    if list_ids in (None, []):
        if new_list is None:
            raise missing("listIds is missing: give listIds, or newList to import into a new list")
        return [], new_list["listName"]
    if not isinstance(list_ids, list) or not all(is_int(i) and i > 0 for i in list_ids):
        raise invalid("listIds must be a list of positive integers")
    return list(dict.fromkeys(list_ids)), new_list["listName"] if new_list else None


def _entries(value: Any) -> tuple[list[ImportEntry], int, int]:
    """The valid entries, first one per address, and how many were invalid and repeated."""
    if not isinstance(value, list) or not value:
        raise invalid("jsonBody must be a non-empty list of {email, attributes}")
    entries: dict[str, ImportEntry] = {}
    bad = repeated = 0
    for item in value:
        email = item.get("email") if isinstance(item, dict) else None
        attributes = item.get("attributes") if isinstance(item, dict) else None
        if not is_email(email) or not isinstance(attributes, (dict, type(None))):
            bad += 1
        elif email.lower() in entries:
            repeated += 1
        else:
            entries[email.lower()] = ImportEntry(email.lower(), dict(attributes or {}))
    if not entries:
        raise invalid("We could not find any valid email in jsonBody")
    return list(entries.values()), bad, repeated


def parse_import_request(payload: dict[str, Any]) -> ImportRequest:
    for key in ("fileBody", "fileUrl"):
        if payload.get(key) is not None:
            raise invalid(f"{key} is not supported by the sandbox: send the contacts as jsonBody")
    if payload.get("jsonBody") is None:
        raise missing("jsonBody is missing (the sandbox imports jsonBody only, not fileBody or fileUrl)")
    list_ids, new_list = _list_ids(payload)
    update_existing = _flag(payload, "updateExistingContacts", True)
    empty_erases = _flag(payload, "emptyContactsAttributes", False)
    for key in IGNORED_FLAGS:
        _flag(payload, key, False)
    if payload.get("notifyUrl") is not None and not isinstance(payload["notifyUrl"], str):
        raise invalid("notifyUrl must be a string")
    entries, bad, repeated = _entries(payload["jsonBody"])
    return ImportRequest(entries, bad, repeated, list_ids, new_list, update_existing, empty_erases)


def _is_empty(value: Any) -> bool:
    return value is None or value == ""


def created_attributes(incoming: dict[str, Any]) -> dict[str, Any]:
    """A new contact keeps only the attributes that have a value."""
    return {k: v for k, v in incoming.items() if not _is_empty(v)}


def merged_attributes(
    existing: dict[str, Any], incoming: dict[str, Any], empty_erases: bool
) -> dict[str, Any]:
    """An update: values overwrite; an empty value erases the attribute only with
    ``emptyContactsAttributes``, and leaves it alone otherwise."""
    merged = dict(existing)
    for key, value in incoming.items():
        if not _is_empty(value):
            merged[key] = value
        elif empty_erases:
            merged.pop(key, None)
    return merged
