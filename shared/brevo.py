"""The Brevo seam: contact upserts and transactional email over Brevo's HTTP API v3.

It takes a `requests.Session` and a base URL, so tests point it at the local sandbox and production
at api.brevo.com. Brevo's answers become domain errors here: timeouts, connection failures, 429 and
5xx are `UpstreamUnavailable` (503, worth retrying); any other refusal is `UpstreamError` (502).
Brevo's own messages can echo the address, so only its error code is carried forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests
from urllib3.exceptions import ReadTimeoutError

from shared.errors import UpstreamError, UpstreamUnavailable


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

    def upsert_contact(self, email: str, name: str) -> str:
        """Create or update the contact; returns "created" (201) or "updated" (204)."""
        attributes = {"FIRSTNAME": name} if name else {}
        body = {"email": email, "attributes": attributes, "updateEnabled": True}
        response = self._post("/contacts", body, "contact upsert")
        return "created" if response.status_code == 201 else "updated"

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

    def _post(self, path: str, body: dict, what: str) -> requests.Response:
        try:
            response = self._session.post(
                self._base + path, json=body, headers=self._headers, timeout=self._timeout
            )
        except requests.RequestException as exc:
            if _timed_out(exc):
                raise UpstreamUnavailable(f"Brevo did not answer the {what} in time") from None
            raise UpstreamUnavailable(f"Brevo could not be reached for the {what}") from None
        if response.status_code in (200, 201, 202, 204):
            return response
        code = _error_code(response)
        message = f"Brevo refused the {what} ({response.status_code} {code})"
        if response.status_code == 429 or response.status_code >= 500:
            raise UpstreamUnavailable(message, code="upstream_unavailable")
        error = UpstreamError(message, code="upstream_rejected")
        error.upstream_code = code
        raise error


def _timed_out(exc: requests.RequestException) -> bool:
    # requests reports a read timeout on a reused connection as ConnectionError(ReadTimeoutError).
    return isinstance(exc, requests.Timeout) or any(isinstance(a, ReadTimeoutError) for a in exc.args)


def _error_code(response: requests.Response) -> str:
    try:
        return str(response.json().get("code", "error"))
    except (ValueError, AttributeError):
        return "error"
