"""The Brevo seam: contacts (created, never overwritten) and transactional email over Brevo's
HTTP API v3, through a `requests.Session` and a base URL, so tests point it at the local sandbox.

Brevo's answers become domain errors here: a timeout, no connection, a 429, a 5xx or a 402 (the
sending quota spent) is `UpstreamUnavailable` (503, worth retrying), any other refusal
`UpstreamError` (502). Each carries Brevo's status and error code, never its message, and
`not_sent` when Brevo refused (4xx): nothing went out. Rate-limit headers come back as a `Pace`;
past `IDEMPOTENCY_WINDOW_SECONDS`, `find_sent` asks the transactional log instead
(docs/idempotency.md#how-it-works).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import requests
from urllib3.exceptions import ReadTimeoutError

from shared.config.errors import UpstreamError, UpstreamUnavailable

IDEMPOTENCY_WINDOW_SECONDS = 20 * 60  # Brevo keeps keys "about 30 minutes"; count on 20
RETRY_AFTER_SECONDS = 2  # what a caller is told after a timeout or a 5xx from Brevo
MAX_RETRY_AFTER_SECONDS = 3600
LOG_PAGE = 500  # Brevo's default page of the transactional log
LOG_PAGES = 10
# What `upsert_contact` did, worded for the receipt's "contact ... in Brevo".
CONTACT_CREATED = "created"
CONTACT_UNCHANGED = "left unchanged"
QUOTA_STATUS = 402  # Brevo: the account has no email credits left (its plan's sending quota)
QUOTA_RETRY_AFTER_SECONDS = 3600


@dataclass(frozen=True)
class Pace:
    """What Brevo's rate-limit headers said: calls left in the window and seconds until it resets
    (None where a header was absent or not a number)."""

    remaining: int | None = None
    reset: float | None = None

    @classmethod
    def of(cls, response: requests.Response) -> Pace:
        return cls(_header_number(response, "x-sib-ratelimit-remaining"), _reset_seconds(response))


@dataclass(frozen=True)
class Email:
    sender_email: str
    sender_name: str
    to_email: str
    to_name: str
    subject: str
    html: str
    text: str
    tags: tuple[str, ...] = ()


class BrevoClient:
    def __init__(self, session: requests.Session, base_url: str, api_key: str, timeout: float):
        self._session = session
        self._base = base_url.rstrip("/")
        self._headers = {"api-key": api_key, "accept": "application/json"}
        self._timeout = timeout

    @classmethod
    def connect(cls, base_url: str, api_key: str, timeout: float) -> BrevoClient:
        """A client with a session of its own, whose connections every call reuses."""
        return cls(requests.Session(), base_url, api_key, timeout)

    def upsert_contact(self, email: str, name: str) -> str:
        """Create the contact if Brevo has none for this address: `CONTACT_CREATED`, or
        `CONTACT_UNCHANGED` when one exists."""
        return self.create_contact(email, name)[0]

    def create_contact(self, email: str, name: str, list_id: int = 0) -> tuple[str, Pace]:
        """Create the contact if Brevo has none for this address (`CONTACT_CREATED`, or
        `CONTACT_UNCHANGED` when one exists), with the pace Brevo reported. Anyone can buy for any
        address, so a purchase never changes a contact that an earlier purchase or the store
        owner made: the request leaves out `updateEnabled`, and Brevo answers an existing contact
        with 400 duplicate_parameter."""
        body: dict = {"email": email, "attributes": _attributes(name)}
        if list_id:
            body["listIds"] = [list_id]
        try:
            response = self._post("/contacts", body, "contact create")
        except UpstreamError as exc:
            if exc.upstream_code == "duplicate_parameter":
                return CONTACT_UNCHANGED, exc.pace if isinstance(exc.pace, Pace) else Pace()
            raise
        return CONTACT_CREATED, Pace.of(response)

    def import_contacts(self, contacts: list[tuple[str, str]], list_id: int) -> Pace:
        """Hand Brevo a batch of (email, name) to create in list `list_id`, in one call of the
        contacts family (`POST /contacts/import`, answered 202 and run by Brevo in the
        background). `updateExistingContacts` is false: a contact Brevo has is left as it is."""
        body = {
            "jsonBody": [{"email": email, "attributes": _attributes(name)} for email, name in contacts],
            "listIds": [list_id],
            "updateExistingContacts": False,
            "emptyContactsAttributes": False,
            "disableNotification": True,
        }
        return Pace.of(self._post("/contacts/import", body, "contact import"))

    def send_email(self, email: Email, idempotency_key: str | None = None) -> str | None:
        """Send one transactional email; returns Brevo's message id, or None when Brevo
        recognises `idempotency_key` (a UUID) from an earlier send: the email already went out."""
        to = {"email": email.to_email}
        if email.to_name:
            to["name"] = email.to_name
        body = {
            "sender": {"email": email.sender_email, "name": email.sender_name},
            "to": [to],
            "subject": email.subject,
            "htmlContent": email.html,
            "textContent": email.text,
            "tags": list(email.tags),
        }
        if idempotency_key:
            body["headers"] = {"idempotencyKey": idempotency_key}
        try:
            response = self._post("/smtp/email", body, "fulfillment email")
        except UpstreamError as exc:
            if idempotency_key and exc.upstream_code == "duplicate_parameter":
                return None
            raise
        try:
            return str(response.json()["messageId"])
        except (ValueError, KeyError, TypeError):
            raise UpstreamError("Brevo accepted the email but returned no messageId") from None

    def find_sent(self, to_email: str, tag: str) -> str | None:
        """The message id of an email to `to_email` tagged `tag` in Brevo's transactional log
        (its last 30 days, newest first), or None when there is none."""
        what = "email log lookup"
        for page in range(LOG_PAGES):
            params = {"email": to_email, "sort": "desc", "limit": LOG_PAGE, "offset": page * LOG_PAGE}
            response = self._call("GET", "/smtp/emails", what, params=params, absent_ok=True)
            if response.status_code == 404:
                if _error_code(response) == "document_not_found":  # Brevo: nothing matches
                    return None
                raise UpstreamUnavailable(
                    f"Brevo answered the {what} with 404 {_error_code(response)}",
                    retry_after=RETRY_AFTER_SECONDS,
                )
            entries = _log_entries(response)
            for entry in entries:
                tags = entry.get("tags")
                if isinstance(tags, list) and tag in tags:
                    return str(entry.get("messageId") or "unknown")
            if len(entries) < LOG_PAGE:
                return None
        raise UpstreamError(f"Brevo's log holds too many emails to this address to finish the {what}")

    def _post(self, path: str, body: dict, what: str) -> requests.Response:
        return self._call("POST", path, what, body=body)

    def _call(
        self,
        method: str,
        path: str,
        what: str,
        *,
        body: dict | None = None,
        params: dict | None = None,
        absent_ok: bool = False,
    ) -> requests.Response:
        try:
            response = self._session.request(
                method,
                self._base + path,
                json=body,
                params=params,
                headers=self._headers,
                timeout=self._timeout,
            )
        except requests.RequestException as exc:
            if _timed_out(exc):
                raise UpstreamUnavailable(
                    f"Brevo did not answer the {what} in time", retry_after=RETRY_AFTER_SECONDS
                ) from None
            raise UpstreamUnavailable(
                f"Brevo could not be reached for the {what}", retry_after=RETRY_AFTER_SECONDS
            ) from None
        if response.status_code in (200, 201, 202, 204) or (absent_ok and response.status_code == 404):
            return response
        code = _error_code(response)
        status = response.status_code
        message = f"Brevo refused the {what} ({status} {code})"
        if status == QUOTA_STATUS:
            error: UpstreamError = UpstreamUnavailable(
                f"the store's email provider refused the {what}: the store's sending quota is used "
                "up for now; retry later",
                code="upstream_unavailable",
                retry_after=QUOTA_RETRY_AFTER_SECONDS,
            )
        elif status == 429 or status >= 500:
            error = UpstreamUnavailable(
                message, code="upstream_unavailable", retry_after=_retry_after(response)
            )
        else:
            error = UpstreamError(message, code="upstream_rejected")
        error.upstream_code, error.upstream_status = code, status
        error.not_sent = 400 <= status < 500  # Brevo refused the call: nothing went out
        error.pace = Pace.of(response)
        raise error


def _timed_out(exc: requests.RequestException) -> bool:
    # requests reports a read timeout on a reused connection as ConnectionError(ReadTimeoutError).
    return isinstance(exc, requests.Timeout) or any(isinstance(a, ReadTimeoutError) for a in exc.args)


def _retry_after(response: requests.Response) -> int:
    """Seconds until Brevo takes calls again: its rate-limit reset for a 429 (Brevo sends no
    Retry-After), a short pause for a 5xx."""
    reset = _reset_seconds(response) if response.status_code == 429 else None
    if reset is None:
        return RETRY_AFTER_SECONDS
    return max(1, min(MAX_RETRY_AFTER_SECONDS, math.ceil(reset)))


def _reset_seconds(response: requests.Response) -> float | None:
    """`x-sib-ratelimit-reset`, the seconds until the window resets, bounded; None if unusable."""
    try:
        reset = float(response.headers.get("x-sib-ratelimit-reset", ""))
    except (TypeError, ValueError):
        return None
    if not math.isfinite(reset) or reset < 0:
        return None
    return min(reset, MAX_RETRY_AFTER_SECONDS)


def _header_number(response: requests.Response, name: str) -> int | None:
    value = (response.headers.get(name) or "").strip()
    return int(value) if value.isascii() and value.isdigit() and len(value) < 12 else None


def _attributes(name: str) -> dict[str, str]:
    return {"FIRSTNAME": name} if name else {}


def _log_entries(response: requests.Response) -> list[dict]:
    try:
        entries = response.json().get("transactionalEmails") or []
    except (ValueError, AttributeError):
        raise UpstreamError("Brevo's email log answered with something other than JSON") from None
    if not isinstance(entries, list):
        raise UpstreamError("Brevo's email log answered in an unexpected shape")
    return [entry for entry in entries if isinstance(entry, dict)]


def _error_code(response: requests.Response) -> str:
    try:
        return str(response.json().get("code", "error"))
    except (ValueError, AttributeError):
        return "error"
