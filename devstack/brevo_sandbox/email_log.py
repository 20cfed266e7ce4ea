"""Brevo's transactional log (``GET /v3/smtp/emails``): the query it takes and the entries it
lists, one per recipient of each captured email, newest first unless asked otherwise.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from devstack.brevo_sandbox.emails import CapturedEmail
from devstack.brevo_sandbox.wire import invalid, missing, query_value

LOG_DAYS = 30  # the transactional log covers the last 30 days unless dates say otherwise
LOG_MAX_SPAN_DAYS = 31  # "maximum time period that can be selected is one month"
LOG_DEFAULT_LIMIT = 500
LOG_MAX_LIMIT = 1000
DIGITS_RE = re.compile(r"[0-9]{1,12}")


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
    raw = query_value(query, name)
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
    email = query_value(query, "email")
    message_id = query_value(query, "messageId")
    template = query_value(query, "templateId")
    if not (email or message_id or template):
        raise missing("email, templateId or messageId is required")
    if template is not None and not DIGITS_RE.fullmatch(template):
        raise invalid("templateId must be a whole number")
    start_raw, end_raw = query_value(query, "startDate"), query_value(query, "endDate")
    if (start_raw is None) != (end_raw is None):
        raise missing("startDate and endDate go together")
    if start_raw is None or end_raw is None:
        start, end = today - timedelta(days=LOG_DAYS), today
    else:
        start, end = _log_date(start_raw, "startDate"), _log_date(end_raw, "endDate")
        if end < start or (end - start).days > LOG_MAX_SPAN_DAYS:
            raise invalid("endDate must follow startDate by at most one month")
    sort = query_value(query, "sort") or "desc"
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
