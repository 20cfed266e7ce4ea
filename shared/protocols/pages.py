"""HTML views for people: a receipt (security audit and finance billing view) and a day's
receipts for finance. The markup is in templates (shared/seams/templates/*.html, rendered by
`shared.seams.templates`); this module hands them plain values. Every value is escaped, control and
format characters included (they are shown as backslash escapes); pages carry no script and load
nothing.

The pages are served under `default-src 'none'; style-src 'unsafe-inline'`, so all styling is one
inline <style> (templates/pages.css) and everything else is plain, semantic HTML: landmarks, one
h1, headed sections, tables with captions and header scopes, results in words (never colour alone),
colours with at least 4.5:1 contrast, a fluid layout for phones and a print stylesheet.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta, timezone
from urllib.parse import quote, urlencode

from shared.purchase.receipt.signatures import Verdict
from shared.seams import templates
from shared.seams.ledger import DayListing, LedgerEntry

SITE_NAME = "Storefront"
JWKS_PATH = "/.well-known/jwks.json"

CHECK_LABELS = {
    "idempotency": "Idempotency",
    "input_schema": "Input schema",
    "rate_limit": "Rate limit",
    "cost_ceiling": "Cost ceiling",
    "contact_upsert": "Contact upsert",
    "fulfillment_email": "Fulfillment email",
}
# result → (symbol, word, badge style); the word carries the meaning, the colour only repeats it.
RESULT_BADGES = {
    "pass": ("\u2713", "Pass", "pass"),
    "fail": ("\u2717", "Fail", "fail"),
    "skipped": ("\u2013", "Skipped", "skipped"),
    "degraded": ("!", "Degraded", "degraded"),
}
STATUS_BADGES = {
    "fulfilled": ("\u2713", "Fulfilled", "pass"),
    "refused": ("\u2717", "Refused", "fail"),
    "failed": ("\u2717", "Failed", "fail"),
}
CHANNEL_LABELS = {
    "mcp": "MCP (tools/call)",
    "http": "HTTP (POST /api/a2a/purchase)",
    "a2a": "A2A (SendMessage, or 0.3's message/send)",
    "ucp": "UCP (checkout complete)",
}


def message_page(title: str, message: str) -> str:
    """A short page for people: a receipt that does not exist, a refused download."""
    return _render("message.html", title, "Message", message=message)


def receipt_page(receipt: dict, verdict: Verdict) -> str:
    """A receipt for people: what the security audit needs, then what finance bills."""
    checks = [c for c in receipt.get("checks") or [] if isinstance(c, dict)]
    caller = _obj(receipt.get("caller"))
    channel = str(caller.get("channel") or "")
    return _render(
        "receipt.html",
        f"Receipt {receipt.get('receipt_id')}",
        "Receipt",
        receipt=receipt,
        verdict=verdict,
        checks=checks,
        idempotency=next((c for c in checks if c.get("name") == "idempotency"), None),
        error=receipt.get("error") if isinstance(receipt.get("error"), dict) else None,
        channel=CHANNEL_LABELS.get(channel, channel),
        caller=caller,
        agent=verified_agent(caller),
        **{part: _obj(receipt.get(part)) for part in ("buyer", "download", "signature", "bundle", "billing")},
        jwks_path=JWKS_PATH,
    )


def verified_agent(caller: dict) -> dict[str, str] | None:
    """The verified agent the receipt names ({origin, key}); None for an unverified caller, and for
    a receipt issued before agents were verified."""
    agent = _obj(caller.get("agent"))
    origin, key = agent.get("origin"), agent.get("key_thumbprint")
    if agent.get("verified") is True and isinstance(origin, str) and isinstance(key, str):
        return {"origin": origin, "key": key}
    return None


def day_page(listing: DayListing, page_size: int, code: str | None = None) -> str:
    """Finance: one page of a day's receipts, with the whole day's totals and a next-page link.
    `code` is the function key the page was opened with on Azure; its links carry it on."""
    next_href = None
    if listing.next_cursor:
        next_href = _query(date=listing.date, page_size=page_size, cursor=listing.next_cursor, code=code)
    return _render(
        "day.html",
        f"Receipts of {listing.date}",
        "Finance",
        listing=listing,
        other_days=_other_days(listing.date, page_size, code),
        cost_unit=_cost_unit(listing.receipts),
        next_href=next_href,
        receipt_href=lambda receipt_id: f"/api/receipts/{quote(receipt_id, safe='')}",
    )


def _render(template: str, title: str, area: str, **context: object) -> str:
    return _environment().get_template(template).render(title=title, area=area, **context)


@functools.cache
def _environment():
    """The pages' environment (built on the first page, not at import), with what every page and
    its macros use."""
    environment = templates.environment(templates.BUILT_IN)
    environment.globals.update(
        site_name=SITE_NAME,
        utc=_utc,
        result_badge=lambda result: _badge(RESULT_BADGES, result),
        status_badge=lambda status: _badge(STATUS_BADGES, status),
        check_label=lambda name: CHECK_LABELS.get(str(name), name),
    )
    return environment


def _obj(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _badge(badges: dict[str, tuple[str, str, str]], value: object) -> tuple[str, str, str]:
    return badges.get(str(value), ("?", str(value or "Unknown"), "skipped"))


def _utc(value: object, clock_only: bool = False) -> str | None:
    """An ISO 8601 time as people read it in UTC, or None when it is not one (it is then shown
    as given)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if parsed.tzinfo is None:
            return None
        parsed = parsed.astimezone(timezone.utc)
    except (ValueError, OverflowError):  # OverflowError: an offset past year 1 or 9999 in UTC
        return None
    return parsed.strftime("%H:%M:%S UTC" if clock_only else "%Y-%m-%d %H:%M:%S UTC")


def _query(**params: object) -> str:
    return "?" + urlencode({k: str(v) for k, v in params.items() if v is not None})


def _other_days(day: str, page_size: int, code: str | None) -> list[dict] | None:
    """Links to the day before and the day after, or None when `day` is not a date; the
    calendar's first and last days (0001-01-01, 9999-12-31) have only the one that exists."""
    try:
        current = date.fromisoformat(day)
    except (TypeError, ValueError):
        return None
    days = []
    if current > date.min:
        days.append((True, (current - timedelta(days=1)).isoformat()))
    if current < date.max:
        days.append((False, (current + timedelta(days=1)).isoformat()))
    return [
        {"previous": previous, "date": other, "href": _query(date=other, page_size=page_size, code=code)}
        for previous, other in days
    ]


def _cost_unit(entries: list[LedgerEntry]) -> str:
    """The one cost currency of the listed receipts, or "" when there are none or several."""
    units = {entry.cost_currency for entry in entries}
    return units.pop() if len(units) == 1 else ""
