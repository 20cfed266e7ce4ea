"""Brevo sandbox: a local, in-memory stand-in for Brevo's HTTP API v3.

Run ``python -m devstack.brevo_sandbox [--host H] [--port P] [--api-key K]`` and
point the Brevo client at ``http://H:P/v3``. Standard library only.

What it promises:

* ``POST /v3/contacts`` and ``POST /v3/smtp/email`` answer with the status
  codes and JSON bodies real Brevo uses for create, upsert, duplicate,
  validation, authentication and ``headers.idempotencyKey`` de-duplication
  (remembered for 30 minutes, as Brevo does).
* ``GET /v3/smtp/emails`` is Brevo's transactional log: the accepted emails
  to one address (or with one message id), newest first, with their tags.
* Nothing leaves the machine. Accepted emails and contacts live in memory
  only and are shown on ``GET /`` (the way Mailpit shows SMTP mail).
* ``/_sandbox/*`` is a control API for tests: read captured emails, contacts
  and counters, inject failures and delays, reset everything.
* One lock guards all state, so concurrent requests are safe. Responses are
  HTTP/1.1 with an exact Content-Length (204s have no body and, per RFC 9110,
  no Content-Length), so keep-alive clients work.
* One log line per request (method, path, status) goes to stderr; request
  bodies, query strings and headers are never logged.
"""

from __future__ import annotations

import argparse
import html
import itertools
import json
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from email.message import Message
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BREVO_PATHS = ("/v3/contacts", "/v3/smtp/email", "/v3/smtp/emails")
IDEMPOTENCY_WINDOW_SECONDS = 30 * 60
LOG_DAYS = 30  # the transactional log covers the last 30 days unless dates say otherwise
LOG_MAX_SPAN_DAYS = 31  # "maximum time period that can be selected is one month"
LOG_DEFAULT_LIMIT = 500
LOG_MAX_LIMIT = 1000
MAX_BODY_BYTES = 10 * 1024 * 1024
MESSAGE_ID_DOMAIN = "smtp-relay.mailin.fr"
JSON_TYPE = "application/json"
HTML_TYPE = "text/html; charset=utf-8"
DEFAULT_FAULT_BODY = {"code": "internal_error", "message": "Injected fault"}
# What Brevo sends with a 429 (and no Retry-After); a fault's own headers override these.
RATE_LIMIT_HEADERS = {
    "x-sib-ratelimit-limit": "10",
    "x-sib-ratelimit-remaining": "0",
    "x-sib-ratelimit-reset": "1",
}
HEADER_NAME_RE = re.compile(r"[A-Za-z0-9-]{1,64}")
PRINTABLE_RE = re.compile(r"[ -~]{0,1024}")
OWN_HEADERS = frozenset({"content-type", "content-length", "cache-control", "connection"})
UNAUTHORIZED = {"code": "unauthorized", "message": "Key not found"}
DUPLICATE_CONTACT = "Unable to create contact, email is already associated with another Contact"

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
DIGITS_RE = re.compile(r"[0-9]{1,12}")
UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
HREF_RE = re.compile(r"""(?<![\w-])href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
TAG_RE = re.compile(r"<[^>]*>")
URL_RE = re.compile(r"""https?://[^\s<>"'`]+""", re.IGNORECASE)
URL_TRAILING_PUNCTUATION = ".,;:!?)]}"


class ApiError(Exception):
    """A Brevo-style error: HTTP status plus ``{"code", "message"}`` body, and ``metadata`` where
    Brevo sends it."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.metadata = metadata


def invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_parameter", message)


def missing(message: str) -> ApiError:
    return ApiError(400, "missing_parameter", message)


# Record fields use Brevo's camelCase names so asdict() is already the wire format.


@dataclass
class Contact:
    id: int
    email: str
    attributes: dict[str, Any]
    listIds: list[int]
    upserts: int
    created_at: str
    updated_at: str


@dataclass
class ContactRequest:
    email: str
    attributes: dict[str, Any]
    listIds: list[int]
    updateEnabled: bool


@dataclass
class EmailRequest:
    sender: dict[str, Any]
    to: list[dict[str, Any]]
    subject: str | None
    htmlContent: str | None
    textContent: str | None
    templateId: int | None
    params: dict[str, Any]
    headers: dict[str, Any]
    tags: list[str]

    @property
    def idempotency_key(self) -> str | None:
        return _idempotency_key(self.headers)


@dataclass
class CapturedEmail:
    id: int
    messageId: str
    sender: dict[str, Any]
    to: list[dict[str, Any]]
    subject: str | None
    htmlContent: str | None
    textContent: str | None
    templateId: int | None
    params: dict[str, Any]
    headers: dict[str, Any]
    tags: list[str]
    received_at: str
    links: list[str]


@dataclass
class Fault:
    id: int
    path: str
    status: int | None
    times: int
    match: str | None
    delay_seconds: float
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload).encode("utf-8"))


def error_response(status: int, code: str, message: str) -> Response:
    return json_response(status, {"code": code, "message": message})


def html_response(status: int, page: str) -> Response:
    return Response(status, page.encode("utf-8"), HTML_TYPE)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- validation -------------------------------------------------------------


def parse_json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        payload = None
    if not isinstance(payload, dict):
        raise ApiError(400, "bad_request", "Input must be a json object")
    return payload


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_email(value: Any) -> bool:
    return isinstance(value, str) and EMAIL_RE.match(value) is not None


def _object_field(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{key} must be an object")
    return value


def _string_field(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid(f"{key} must be a string")
    return value or None


def parse_contact_request(payload: dict[str, Any]) -> ContactRequest:
    email = payload.get("email")
    if not _is_email(email):
        raise invalid("email is missing or is not a valid email address")
    list_ids = payload.get("listIds") or []
    if not isinstance(list_ids, list) or not all(_is_int(i) for i in list_ids):
        raise invalid("listIds must be a list of integers")
    update_enabled = payload.get("updateEnabled", False)
    if not isinstance(update_enabled, bool):
        raise invalid("updateEnabled must be a boolean")
    attributes = _object_field(payload, "attributes")
    return ContactRequest(email.lower(), attributes, list_ids, update_enabled)


def _parse_address(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object with an email")
    if value.get("email") in (None, ""):
        raise missing(f"{name}.email is missing")
    if not _is_email(value["email"]):
        raise invalid(f"{name}.email is not a valid email address")
    if value.get("name") is not None and not isinstance(value["name"], str):
        raise invalid(f"{name}.name must be a string")
    return value


def _parse_recipients(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise missing("to is missing")
    if not isinstance(value, list) or not value:
        raise invalid("to must be a non-empty list of recipients")
    return [_parse_address(item, f"to[{i}]") for i, item in enumerate(value)]


def _parse_template_id(value: Any) -> int | None:
    if value is None:
        return None
    if not _is_int(value) or value <= 0:
        raise invalid("templateId must be a positive integer")
    return value


def _parse_tags(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise invalid("tags must be a list of strings")
    return value


def _idempotency_key(headers: dict[str, Any]) -> str | None:
    for name, value in headers.items():
        if name.lower() == "idempotencykey":
            return value
    return None


def _check_idempotency_key(headers: dict[str, Any]) -> None:
    key = _idempotency_key(headers)
    if key is not None and not (isinstance(key, str) and UUID_RE.match(key)):
        raise invalid("headers.idempotencyKey must be a UUID string")


def parse_email_request(payload: dict[str, Any]) -> EmailRequest:
    if payload.get("sender") is None:
        raise missing("sender is missing")
    sender = _parse_address(payload["sender"], "sender")
    to = _parse_recipients(payload.get("to"))
    template_id = _parse_template_id(payload.get("templateId"))
    subject = _string_field(payload, "subject")
    if subject is None and template_id is None:
        raise missing("subject is missing")
    html_content = _string_field(payload, "htmlContent")
    text_content = _string_field(payload, "textContent")
    if not (html_content or text_content or template_id):
        raise missing("One of htmlContent, textContent or templateId is required")
    headers = _object_field(payload, "headers")
    _check_idempotency_key(headers)
    return EmailRequest(
        sender=sender,
        to=to,
        subject=subject,
        htmlContent=html_content,
        textContent=text_content,
        templateId=template_id,
        params=_object_field(payload, "params"),
        headers=headers,
        tags=_parse_tags(payload.get("tags")),
    )


def _parse_fault_status(value: Any) -> int | None:
    if value in (None, 0):
        return None
    if not _is_int(value) or not 400 <= value <= 599:
        raise invalid("status must be an integer between 400 and 599, or 0/null")
    return value


def _parse_delay(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise invalid("delay_seconds must be a non-negative number")
    return float(value)


def parse_fault(payload: dict[str, Any]) -> Fault:
    path = payload.get("path")
    if path not in BREVO_PATHS:
        raise invalid(f"path must be one of {', '.join(BREVO_PATHS)}")
    times = payload.get("times", 1)
    if not _is_int(times) or times < 1:
        raise invalid("times must be a positive integer")
    status = _parse_fault_status(payload.get("status"))
    delay = _parse_delay(payload.get("delay_seconds"))
    if status is None and delay == 0:
        raise invalid("A fault needs a status, a delay_seconds, or both")
    match = _string_field(payload, "match")
    body = payload.get("body") or dict(DEFAULT_FAULT_BODY)
    if not isinstance(body, dict):
        raise invalid("body must be an object")
    headers = _parse_fault_headers(payload.get("headers"))
    if status == 429:
        headers = {**RATE_LIMIT_HEADERS, **headers}
    return Fault(0, path, status, times, match, delay, body, headers)


def _parse_fault_headers(value: Any) -> dict[str, str]:
    """Extra response headers: lower-cased names (so they override the defaults whatever their
    case), printable ASCII values, and none of the headers the sandbox writes itself."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("headers must be an object")
    headers = {}
    for name, text in value.items():
        if not (isinstance(name, str) and HEADER_NAME_RE.fullmatch(name)):
            raise invalid("header names are letters, digits and dashes")
        if name.lower() in OWN_HEADERS:
            raise invalid(f"{name} is set by the sandbox itself")
        if not (isinstance(text, str) and PRINTABLE_RE.fullmatch(text)):
            raise invalid(f"the {name} header needs a printable ASCII string")
        headers[name.lower()] = text
    return headers


# --- link extraction ----------------------------------------------------------


def _clean_url(url: str) -> str:
    """Drop punctuation glued to a URL; keep a ")" that closes a "(" inside it."""
    while url and url[-1] in URL_TRAILING_PUNCTUATION:
        if url[-1] == ")" and url.count("(") >= url.count(")"):
            break
        url = url[:-1]
    return url


def extract_links(html_content: str | None, text_content: str | None) -> list[str]:
    """Distinct http(s) URLs from href attributes and text, in order of appearance."""
    found: list[str] = []
    if html_content:
        for match in HREF_RE.finditer(html_content):
            found.append(html.unescape(next(g for g in match.groups() if g is not None)).strip())
        found += URL_RE.findall(html.unescape(TAG_RE.sub(" ", html_content)))
    if text_content:
        found += URL_RE.findall(text_content)
    links = [_clean_url(url) for url in found if URL_RE.match(url)]
    return list(dict.fromkeys(links))


# --- state --------------------------------------------------------------------


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
                _merge_contact(existing, req)
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
                if fault.path == path and _fault_matches(fault, body):
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


def _merge_contact(contact: Contact, req: ContactRequest) -> None:
    contact.attributes.update(req.attributes)
    contact.listIds = list(dict.fromkeys(contact.listIds + req.listIds))
    contact.upserts += 1
    contact.updated_at = utc_now()


def _fault_matches(fault: Fault, body: bytes) -> bool:
    return fault.match is None or fault.match.encode("utf-8") in body


# --- the transactional log (GET /v3/smtp/emails) ------------------------------------


@dataclass(frozen=True)
class LogQuery:
    email: str | None
    message_id: str | None
    template_id: int | None
    start: date
    end: date
    descending: bool
    limit: int
    offset: int


def _log_int(query: dict[str, list[str]], name: str, default: int, high: int) -> int:
    raw = _query_value(query, name)
    if raw is None:
        return default
    if not DIGITS_RE.fullmatch(raw) or int(raw) > high:
        raise invalid(f"{name} must be a whole number between 0 and {high}")
    return int(raw)


def _log_date(raw: str, name: str) -> date:
    if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", raw):
        try:
            return date.fromisoformat(raw)
        except ValueError:
            pass
    raise invalid(f"{name} must be a date as YYYY-MM-DD")


def parse_log_query(query: dict[str, list[str]], today: date) -> LogQuery:
    email = _query_value(query, "email")
    message_id = _query_value(query, "messageId")
    template = _query_value(query, "templateId")
    if not (email or message_id or template):
        raise missing("email, templateId or messageId is required")
    if template is not None and not DIGITS_RE.fullmatch(template):
        raise invalid("templateId must be a whole number")
    start_raw, end_raw = _query_value(query, "startDate"), _query_value(query, "endDate")
    if (start_raw is None) != (end_raw is None):
        raise missing("startDate and endDate go together")
    if start_raw is None or end_raw is None:
        start, end = today - timedelta(days=LOG_DAYS), today
    else:
        start, end = _log_date(start_raw, "startDate"), _log_date(end_raw, "endDate")
        if end < start or (end - start).days > LOG_MAX_SPAN_DAYS:
            raise invalid("endDate must follow startDate by at most one month")
    sort = _query_value(query, "sort") or "desc"
    if sort not in ("asc", "desc"):
        raise invalid("sort must be asc or desc")
    return LogQuery(
        email=email.lower() if email else None,
        message_id=message_id,
        template_id=int(template) if template is not None else None,
        start=start,
        end=end,
        descending=sort == "desc",
        limit=_log_int(query, "limit", LOG_DEFAULT_LIMIT, LOG_MAX_LIMIT),
        offset=_log_int(query, "offset", 0, 10**9),
    )


def transactional_log(emails: list[CapturedEmail], q: LogQuery) -> dict[str, Any]:
    """Brevo's answer: one entry per recipient of each matching email, as the log lists them."""
    entries = []
    for email in emails:
        day = date.fromisoformat(email.received_at[:10])
        if not (q.start <= day <= q.end):
            continue
        if q.message_id is not None and email.messageId != q.message_id:
            continue
        if q.template_id is not None and email.templateId != q.template_id:
            continue
        for recipient in email.to:
            if q.email is not None and recipient["email"].lower() != q.email:
                continue
            entry = {
                "email": recipient["email"],
                "subject": email.subject or "",
                "messageId": email.messageId,
                "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{email.messageId}/{recipient['email']}")),
                "date": email.received_at,
                "from": email.sender.get("email", ""),
            }
            if email.templateId is not None:
                entry["templateId"] = email.templateId
            if email.tags:
                entry["tags"] = list(email.tags)
            entries.append(entry)
    if q.descending:
        entries.reverse()
    return {"count": len(entries), "transactionalEmails": entries[q.offset : q.offset + q.limit]}


# --- HTML pages -----------------------------------------------------------------

PAGE_CSS = """
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1f2933;background:#f5f7fa}
header{background:#0b3954;color:#fff;padding:.8rem 1.5rem}
header h1{margin:0;font-size:1.25rem}header a{color:#cde}
main{padding:1rem 1.5rem;max-width:72rem}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;vertical-align:top;padding:.45rem .6rem;
  border-bottom:1px solid #e4e7eb}
th{background:#eef2f6;font-weight:600}
td.time{white-space:nowrap;color:#52606d;font-size:.85rem}
ul.links{margin:0;padding-left:1rem;font-size:.85rem;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;
  background:#fff;padding:1rem}
dt{font-weight:600}dd{margin:0;word-break:break-all}
iframe{width:100%;height:32rem;border:1px solid #cbd2d9;background:#fff}
pre{background:#fff;border:1px solid #cbd2d9;padding:.75rem;
  white-space:pre-wrap;word-break:break-word}
.empty{color:#52606d}
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _page(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(title)}</title><style>{PAGE_CSS}</style></head>"
        '<body><header><h1><a href="/">Brevo sandbox</a></h1></header>'
        f"<main>{body}</main></body></html>"
    )


def _address(entry: dict[str, Any]) -> str:
    name = entry.get("name")
    return f"{name} <{entry['email']}>" if name else entry["email"]


def _links_list(links: list[str]) -> str:
    items = "".join(
        f'<li><a href="{_esc(url)}" rel="noopener noreferrer">{_esc(url)}</a></li>' for url in links
    )
    return f'<ul class="links">{items}</ul>' if links else ""


def _subject(email: CapturedEmail) -> str:
    if email.subject:
        return email.subject
    return f"(template #{email.templateId})" if email.templateId else "(no subject)"


def _index_row(email: CapturedEmail) -> str:
    return (
        f'<tr><td class="time">{_esc(email.received_at)}</td>'
        f"<td>{_esc(', '.join(_address(r) for r in email.to))}</td>"
        f'<td><a href="/emails/{email.id}">{_esc(_subject(email))}</a></td>'
        f"<td>{_links_list(email.links)}</td></tr>"
    )


def render_index(emails: list[CapturedEmail]) -> str:
    """The inbox page: captured emails, newest first."""
    if not emails:
        return _page(
            "Brevo sandbox",
            '<h2>Emails</h2><p class="empty">No emails captured yet.</p>',
        )
    rows = "".join(_index_row(e) for e in reversed(emails))
    table = (
        "<table><thead><tr><th>Received (UTC)</th><th>To</th><th>Subject</th>"
        f"<th>Links</th></tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page(f"Brevo sandbox ({len(emails)})", f"<h2>Emails ({len(emails)})</h2>{table}")


def _metadata(email: CapturedEmail) -> str:
    rows = [
        ("From", _address(email.sender)),
        ("To", ", ".join(_address(r) for r in email.to)),
        ("Received (UTC)", email.received_at),
        ("Message-ID", email.messageId),
    ]
    if email.templateId:
        rows.append(("Template", f"#{email.templateId}"))
    if email.tags:
        rows.append(("Tags", ", ".join(email.tags)))
    return "<dl>" + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in rows) + "</dl>"


def _json_block(title: str, value: dict[str, Any]) -> str:
    if not value:
        return ""
    return f"<h2>{_esc(title)}</h2><pre>{_esc(json.dumps(value, indent=2))}</pre>"


def render_email(email: CapturedEmail) -> str:
    """One email: metadata, links, and the content rendered inertly."""
    parts = [f"<h2>{_esc(_subject(email))}</h2>", _metadata(email)]
    if email.links:
        parts.append(f"<h2>Links</h2>{_links_list(email.links)}")
    if email.htmlContent:
        # Bare "sandbox": no scripts, no same-origin access, no forms, no top nav.
        parts.append(f'<h2>HTML</h2><iframe sandbox srcdoc="{_esc(email.htmlContent)}"></iframe>')
    if email.textContent:
        parts.append(f"<h2>Text</h2><pre>{_esc(email.textContent)}</pre>")
    parts.append(_json_block("Params", email.params))
    parts.append(_json_block("Headers", email.headers))
    return _page(_subject(email), "".join(parts))


# --- routing ----------------------------------------------------------------------

Handler = Callable[[Request, re.Match[str]], Response]


def _query_value(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


class SandboxApp:
    """Maps a parsed Request to a Response; knows nothing about sockets."""

    def __init__(self, api_key: str | None = None) -> None:
        self.state = SandboxState()
        self.api_key = api_key
        routes: list[tuple[str, dict[str, Handler]]] = [
            ("/v3/contacts", {"POST": self._create_contact}),
            ("/v3/smtp/email", {"POST": self._send_email}),
            ("/v3/smtp/emails", {"GET": self._email_log}),
            ("/_sandbox/emails", {"GET": self._list_emails}),
            ("/_sandbox/contacts", {"GET": self._list_contacts}),
            ("/_sandbox/stats", {"GET": self._stats}),
            (
                "/_sandbox/faults",
                {"GET": self._list_faults, "POST": self._add_fault, "DELETE": self._clear_faults},
            ),
            ("/_sandbox/reset", {"POST": self._reset}),
            ("/_sandbox/idempotency-keys", {"DELETE": self._forget_idempotency_keys}),
            ("/", {"GET": self._index_page}),
            (r"/emails/(\d+)", {"GET": self._email_page}),
        ]
        self._routes = [(re.compile(pattern), methods) for pattern, methods in routes]

    def handle(self, req: Request) -> Response:
        try:
            return self._handle(req)
        except ApiError as err:
            body: dict[str, Any] = {"code": err.code, "message": err.message}
            if err.metadata is not None:
                body["metadata"] = err.metadata
            response = json_response(err.status, body)
            response.headers.update(err.headers)
            return response

    def _handle(self, req: Request) -> Response:
        is_brevo = req.path.startswith("/v3/")
        if req.path in BREVO_PATHS:
            self.state.count_request(req.path)
        if is_brevo:
            self._authenticate(req.headers)
        handler, match = self._resolve(req.method, req.path)
        if is_brevo:
            faulted = self._apply_fault(req)
            if faulted is not None:
                return faulted
        return handler(req, match)

    def _authenticate(self, headers: Message) -> None:
        key = headers.get("api-key")
        if not key or (self.api_key is not None and key != self.api_key):
            raise ApiError(401, UNAUTHORIZED["code"], UNAUTHORIZED["message"])

    def _resolve(self, method: str, path: str) -> tuple[Handler, re.Match[str]]:
        for pattern, methods in self._routes:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if method not in methods:
                allow = {"Allow": ", ".join(sorted(methods))}
                raise ApiError(405, "method_not_allowed", f"{method} is not allowed on {path}", allow)
            return methods[method], match
        raise ApiError(404, "not_found", f"No route for {path}")

    def _apply_fault(self, req: Request) -> Response | None:
        """Sleep and/or fail as an injected fault says; None means carry on normally."""
        matched = req.body or "&".join(f"{k}={v}" for k, vs in req.query.items() for v in vs).encode()
        fault = self.state.take_fault(req.path, matched)
        if fault is None:
            return None
        if fault.delay_seconds:
            time.sleep(fault.delay_seconds)
        if not fault.status:
            return None
        response = json_response(fault.status, fault.body)
        response.headers.update(fault.headers)
        return response

    def _create_contact(self, req: Request, _: re.Match[str]) -> Response:
        request = parse_contact_request(parse_json_object(req.body))
        contact_id = self.state.upsert_contact(request)
        if contact_id is None:
            return Response(204)
        return json_response(201, {"id": contact_id})

    def _send_email(self, req: Request, _: re.Match[str]) -> Response:
        email = self.state.capture_email(parse_email_request(parse_json_object(req.body)))
        return json_response(201, {"messageId": email.messageId})

    def _email_log(self, req: Request, _: re.Match[str]) -> Response:
        query = parse_log_query(req.query, datetime.now(timezone.utc).date())
        return json_response(200, transactional_log(self.state.emails(), query))

    def _forget_idempotency_keys(self, req: Request, _: re.Match[str]) -> Response:
        self.state.forget_idempotency_keys()
        return Response(204)

    def _list_emails(self, req: Request, _: re.Match[str]) -> Response:
        emails = self.state.emails(_query_value(req.query, "to"))
        return json_response(200, [asdict(e) for e in emails])

    def _list_contacts(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.contacts(_query_value(req.query, "email")))

    def _stats(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.stats())

    def _list_faults(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.faults())

    def _add_fault(self, req: Request, _: re.Match[str]) -> Response:
        fault_id = self.state.add_fault(parse_fault(parse_json_object(req.body)))
        return json_response(201, {"id": fault_id})

    def _clear_faults(self, req: Request, _: re.Match[str]) -> Response:
        self.state.clear_faults()
        return Response(204)

    def _reset(self, req: Request, _: re.Match[str]) -> Response:
        self.state.reset()
        return Response(204)

    def _index_page(self, req: Request, _: re.Match[str]) -> Response:
        return html_response(200, render_index(self.state.emails()))

    def _email_page(self, req: Request, match: re.Match[str]) -> Response:
        email = self.state.email(int(match.group(1)))
        if email is None:
            page = _page(
                "Email not found",
                '<h2>Email not found</h2><p><a href="/">Back to all emails</a></p>',
            )
            return html_response(404, page)
        return html_response(200, render_email(email))


# --- HTTP plumbing ------------------------------------------------------------------


def _error_code(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


class SandboxHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without this, Nagle and delayed ACKs add 40 ms per
    # keep-alive request.
    disable_nagle_algorithm = True
    server_version = "BrevoSandbox/1.0"
    server: SandboxServer

    def do_GET(self) -> None:
        self._serve()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = do_GET

    def _serve(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_body()
        except ApiError as err:
            self.close_connection = True
            self._write(error_response(err.status, err.code, err.message))
            return
        method = "GET" if self.command == "HEAD" else self.command
        request = Request(method, url.path, parse_qs(url.query), self.headers, body)
        self._write(self.server.app.handle(request))

    def _read_body(self) -> bytes:
        # The body is always drained, even for requests we reject, so the
        # next request on a keep-alive connection starts at a clean boundary.
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "bad_request", "Invalid Content-Length") from None
        if length < 0:
            raise ApiError(400, "bad_request", "Invalid Content-Length")
        if length > MAX_BODY_BYTES:
            raise ApiError(413, "payload_too_large", "Request body is too large")
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            try:
                size = int(self.rfile.readline(1024).split(b";")[0].strip(), 16)
            except ValueError:
                raise ApiError(400, "bad_request", "Invalid chunked body") from None
            total += size
            if total > MAX_BODY_BYTES:
                raise ApiError(413, "payload_too_large", "Request body is too large")
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _write(self, response: Response) -> None:
        self.send_response(response.status)
        # RFC 9110 forbids Content-Length (and a body) on 204 responses.
        if response.status != 204:
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in response.headers.items():
            self.send_header(name, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.status != 204:
            self.wfile.write(response.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """JSON instead of http.server's HTML, for requests that fail to parse."""
        self.close_connection = True
        text = message or explain or HTTPStatus(code).phrase
        self._write(error_response(code, _error_code(code), text))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = urlsplit(getattr(self, "path", "") or "").path or "-"
        status = code.value if isinstance(code, HTTPStatus) else code
        sys.stderr.write(f"{getattr(self, 'command', None) or '-'} {path} {status}\n")

    def log_message(self, format: str, *args: Any) -> None:
        # http.server's own messages quote the request line; neither it nor the peer address
        # goes into the log.
        code = next((arg for arg in args if isinstance(arg, int)), None)
        sys.stderr.write(f"request refused by the HTTP layer{f' ({code})' if code else ''}\n")


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default backlog of 5 resets bursts of concurrent clients

    def __init__(self, address: tuple[str, int], app: SandboxApp) -> None:
        self.app = app
        super().__init__(address, SandboxHandler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (say, timed out during an injected delay) is fine.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


def make_server(host: str, port: int, api_key: str | None = None) -> ThreadingHTTPServer:
    """Bind (port 0 picks a free one) but do not serve; call serve_forever()."""
    return SandboxServer((host, port), SandboxApp(api_key))


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m devstack.brevo_sandbox",
        description="Local stand-in for Brevo's HTTP API v3.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8025)
    parser.add_argument("--api-key", help="accept only this api-key (default: any non-empty key)")
    return parser.parse_args(argv)


def _stop_on_signals(server: ThreadingHTTPServer) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be installed from the main thread

    def stop(signum: int, frame: Any) -> None:
        # shutdown() waits for serve_forever(), which runs in this very thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    server = make_server(args.host, args.port, args.api_key)
    _stop_on_signals(server)
    host, port = server.server_address[:2]
    print(f"Brevo sandbox listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
