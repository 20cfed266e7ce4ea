"""Transactional email (``POST /v3/smtp/email``): the request Brevo accepts, the email the
sandbox captures, and the links it pulls out of the content for tests to follow.

Record fields use Brevo's camelCase names so ``asdict()`` is already the wire format.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from devstack.brevo_sandbox.wire import invalid, is_email, is_int, missing, object_field, string_field

IDEMPOTENCY_WINDOW_SECONDS = 30 * 60
MESSAGE_ID_DOMAIN = "smtp-relay.mailin.fr"

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
HREF_RE = re.compile(r"""(?<![\w-])href\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""", re.IGNORECASE)
TAG_RE = re.compile(r"<[^>]*>")
URL_RE = re.compile(r"""https?://[^\s<>"'`]+""", re.IGNORECASE)
URL_TRAILING_PUNCTUATION = ".,;:!?)]}"


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


def _parse_address(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(f"{name} must be an object with an email")
    if value.get("email") in (None, ""):
        raise missing(f"{name}.email is missing")
    if not is_email(value["email"]):
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
    if not is_int(value) or value <= 0:
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
    subject = string_field(payload, "subject")
    if subject is None and template_id is None:
        raise missing("subject is missing")
    html_content = string_field(payload, "htmlContent")
    text_content = string_field(payload, "textContent")
    if not (html_content or text_content or template_id):
        raise missing("One of htmlContent, textContent or templateId is required")
    headers = object_field(payload, "headers")
    _check_idempotency_key(headers)
    return EmailRequest(
        sender=sender,
        to=to,
        subject=subject,
        htmlContent=html_content,
        textContent=text_content,
        templateId=template_id,
        params=object_field(payload, "params"),
        headers=headers,
        tags=_parse_tags(payload.get("tags")),
    )


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
