"""HTML views for people: a receipt (security audit and finance billing view) and a day's
receipts for finance. Every value is escaped, control and format characters included (they are
shown as backslash escapes); pages carry no script and load nothing.

The pages are served under `default-src 'none'; style-src 'unsafe-inline'`, so all styling is one
inline <style> and everything else is plain, semantic HTML: landmarks, one h1, headed sections,
tables with captions and header scopes, results in words (never colour alone), colours with at least
4.5:1 contrast, a fluid layout for phones and a print stylesheet.
"""

from __future__ import annotations

import html
from datetime import date, datetime, timedelta, timezone
from urllib.parse import quote, urlencode

from shared.ledger import DayListing, LedgerEntry
from shared.printable import printable
from shared.signatures import Verdict

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
_FULL_WIDTH = {"Checked by the server"}
_FULL = ' class="full"'
CHANNELS = {"mcp": "MCP (tools/call)", "http": "HTTP (POST /api/a2a/purchase)"}

_MONO = 'ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace'
# Contrast (WCAG 2 ratios): text #1b1f24 on white 16.6:1, on #f5f6f8 15.3:1; muted #4b5563 7.6:1 and
# 7.0:1; links #0b57d0 6.4:1; badges 7.1-7.4:1; header #fff and #d1d5db on #1f2937 14.7:1 and 10:1.
STYLE = f"""
:root {{ color-scheme: light; --text: #1b1f24; --muted: #4b5563; --line: #d5d9e0; --page: #f5f6f8;
  --card: #ffffff; --link: #0b57d0; --ink: #1f2937; }}
*, *::before, *::after {{ box-sizing: border-box; }}
html {{ -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }}
body {{ margin: 0; background: var(--page); color: var(--text);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }}
.wrap {{ max-width: 64rem; margin: 0 auto; padding: 0 1rem; }}
.site {{ background: var(--ink); color: #ffffff; }}
.site .wrap {{ display: flex; flex-wrap: wrap; align-items: baseline; gap: 0.25rem 0.75rem;
  padding-top: 0.75rem; padding-bottom: 0.75rem; }}
.site p {{ margin: 0; }}
.brand {{ font-weight: 700; letter-spacing: 0.02em; }}
.area {{ color: #d1d5db; }}
main.wrap {{ display: block; padding-top: 2rem; padding-bottom: 1rem; }}
h1 {{ font-size: 1.625rem; line-height: 1.25; margin: 0 0 0.5rem; }}
h1 .id {{ display: block; margin-top: 0.25rem; font: 600 1rem/1.4 {_MONO}; color: var(--muted);
  overflow-wrap: anywhere; }}
h2 {{ font-size: 1.25rem; line-height: 1.3; margin: 0 0 1rem; padding-bottom: 0.5rem;
  border-bottom: 1px solid var(--line); }}
h3 {{ font-size: 1.0625rem; line-height: 1.3; margin: 1.5rem 0 0.75rem; }}
p {{ margin: 0 0 1rem; }}
a {{ color: var(--link); text-underline-offset: 0.15em; }}
a:focus-visible, .scroll:focus-visible {{ outline: 3px solid var(--ink); outline-offset: 2px; }}
code, .mono {{ font-family: {_MONO}; font-size: 0.9em; overflow-wrap: anywhere; }}
.meta {{ display: flex; flex-wrap: wrap; align-items: center; gap: 0.5rem 1.25rem; margin: 0 0 1.5rem;
  color: var(--muted); }}
.meta strong {{ color: var(--text); font-weight: 600; }}
.card {{ background: var(--card); border: 1px solid var(--line); border-radius: 0.5rem;
  padding: 1.25rem 1.5rem; margin: 0 0 1.5rem; }}
.card > h3:first-of-type {{ margin-top: 0.5rem; }}
.card > :last-child {{ margin-bottom: 0; }}
.fields {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr));
  gap: 1rem 1.5rem; margin: 0; }}
.fields > div {{ min-width: 0; }}
.fields > .full {{ grid-column: 1 / -1; }}
.fields dt {{ font-size: 0.8125rem; font-weight: 600; color: var(--muted); margin: 0 0 0.125rem; }}
.fields dd {{ margin: 0; overflow-wrap: anywhere; }}
.fields .big {{ font-size: 1.25rem; font-weight: 600; }}
.note {{ color: var(--muted); font-size: 0.875rem; }}
.hint {{ display: none; }}
.scroll {{ overflow-x: auto; max-width: 100%; }}
table {{ width: 100%; border-collapse: collapse; }}
caption {{ caption-side: top; text-align: left; color: var(--muted); font-size: 0.875rem;
  padding: 0 0 0.5rem; }}
th, td {{ text-align: left; vertical-align: top; padding: 0.5rem 0.75rem;
  border-bottom: 1px solid var(--line); }}
th:first-child, td:first-child {{ padding-left: 0; }}
th:last-child, td:last-child {{ padding-right: 0; }}
thead th {{ font-size: 0.8125rem; color: var(--muted); border-bottom: 2px solid var(--line);
  white-space: nowrap; }}
tbody th {{ font-weight: 600; }}
.stack tbody th {{ min-width: 10.5rem; }}
td {{ overflow-wrap: anywhere; }}
.wide {{ min-width: 42rem; }}
.wide td {{ overflow-wrap: normal; }}
.wide time {{ white-space: nowrap; }}
.amt {{ font-variant-numeric: tabular-nums; }}
.num {{ text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }}
th.amt {{ font-variant-numeric: tabular-nums; }}
.name {{ display: block; font-weight: 400; color: var(--muted); font-size: 0.8125rem; }}
.badge {{ display: inline-block; padding: 0.0625rem 0.5rem; border: 1px solid; border-radius: 999px;
  font-size: 0.875rem; font-weight: 600; line-height: 1.5; white-space: nowrap; }}
.b-pass {{ background: #d1e7dd; color: #0f5132; border-color: #a3cfbb; }}
.b-fail {{ background: #f8d7da; color: #842029; border-color: #f1aeb5; }}
.b-skipped {{ background: #e2e3e5; color: #41464b; border-color: #c4c8cb; }}
.b-degraded {{ background: #fff3cd; color: #664d03; border-color: #ffe69c; }}
.alert {{ border: 1px solid #f1aeb5; border-left: 4px solid #842029; background: #fdf0f0;
  border-radius: 0.375rem; padding: 0.75rem 1rem; margin: 0 0 1rem; }}
.alert dl {{ margin: 0; }}
.pager {{ display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; margin: 1rem 0 0; }}
.days {{ display: flex; flex-wrap: wrap; gap: 0.5rem 1.5rem; margin: 0 0 1.5rem; }}
footer {{ border-top: 1px solid var(--line); color: var(--muted); font-size: 0.875rem; }}
footer .wrap {{ padding-top: 1rem; padding-bottom: 2rem; }}
footer p {{ margin: 0 0 0.25rem; }}
@media (max-width: 40rem) {{
  h1 {{ font-size: 1.375rem; }}
  .card {{ padding: 1rem; border-radius: 0.375rem; }}
  th, td {{ padding: 0.5rem 0.5rem; }}
  .fields {{ grid-template-columns: 1fr; gap: 0.75rem; }}
  .hint {{ display: block; margin: 0 0 0.5rem; }}
  .stack thead {{ position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0);
    white-space: nowrap; }}
  .stack tr {{ display: grid; grid-template-columns: minmax(0, 1fr) auto; gap: 0.25rem 0.75rem;
    padding: 0.625rem 0; border-bottom: 1px solid var(--line); }}
  .stack th, .stack td {{ display: block; min-width: 0; padding: 0; border: 0; }}
  .stack td:last-child {{ grid-column: 1 / -1; }}
}}
@media print {{
  @page {{ margin: 15mm; }}
  body {{ background: none; color: #000000; font-size: 10.5pt; }}
  .wrap {{ max-width: none; padding: 0; }}
  .site {{ background: none; color: #000000; border-bottom: 1px solid #000000; }}
  .area, .meta, .note, caption, thead th, .fields dt, .name, h1 .id, footer {{ color: #000000; }}
  .card {{ border: 0; border-radius: 0; padding: 0; margin: 0 0 1.25rem; background: none; }}
  .keep {{ break-inside: avoid; }}
  .badge, .alert {{ background: none; color: #000000; border-color: #000000; }}
  a {{ color: #000000; }}
  h1, h2, h3, caption {{ break-after: avoid; }}
  tr, .fields, .alert {{ break-inside: avoid; }}
  .scroll {{ overflow: visible; }}
  .wide {{ min-width: 0; }}
  .days, .pager, .hint {{ display: none; }}
}}
"""


def _e(value: object) -> str:
    return html.escape(printable("" if value is None else str(value)))


def _obj(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _document(title: str, area: str, body: str, footer: str = "") -> str:
    foot = f'<footer><div class="wrap">{footer}</div></footer>' if footer else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{_e(title)} \u00b7 {SITE_NAME}</title><style>{STYLE}</style></head><body>"
        f'<header class="site"><div class="wrap"><p class="brand">{SITE_NAME}</p>'
        f'<p class="area">{_e(area)}</p></div></header>'
        f'<main class="wrap">{body}</main>{foot}</body></html>\n'
    )


def _badge(symbol: str, word: str, style: str) -> str:
    return f'<span class="badge b-{style}"><span aria-hidden="true">{_e(symbol)}</span> {_e(word)}</span>'


def _result(result: object) -> str:
    symbol, word, style = RESULT_BADGES.get(str(result), ("?", str(result or "Unknown"), "skipped"))
    return _badge(symbol, word, style)


def _status(status: object) -> str:
    symbol, word, style = STATUS_BADGES.get(str(status), ("?", str(status or "Unknown"), "skipped"))
    return _badge(symbol, word, style)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed.astimezone(timezone.utc) if parsed.tzinfo is not None else None
    except (ValueError, OverflowError):  # OverflowError: an offset past year 1 or 9999 in UTC
        return None


def _time(value: object, *, clock_only: bool = False, missing: str = "Not recorded") -> str:
    """An ISO 8601 UTC time as `<time>`: readable text, the exact value in `datetime`."""
    if value in (None, ""):
        return f'<span class="note">{_e(missing)}</span>'
    parsed = _parse_time(value)
    if parsed is None:
        return _e(value)
    shown = parsed.strftime("%H:%M:%S UTC" if clock_only else "%Y-%m-%d %H:%M:%S UTC")
    return f'<time datetime="{_e(value)}">{_e(shown)}</time>'


def _money(amount: object, currency: object) -> str:
    if amount in (None, ""):
        return '<span class="note">Not recorded</span>'
    unit = f"\u00a0{_e(currency)}" if currency else ""
    return f'<span class="amt">{_e(amount)}</span>{unit}'


def _code(value: object, missing: str = "Not recorded") -> str:
    if value in (None, ""):
        return f'<span class="note">{_e(missing)}</span>'
    return f"<code>{_e(value)}</code>"


def _text(value: object, missing: str = "Not recorded") -> str:
    if value in (None, ""):
        return f'<span class="note">{_e(missing)}</span>'
    return _e(value)


def _fields(items: list[tuple[str, str]]) -> str:
    """A definition list of label → value; the values are HTML the caller has escaped."""
    rows = "".join(
        f"<div{_FULL if name in _FULL_WIDTH else ''}><dt>{_e(name)}</dt><dd>{value}</dd></div>"
        for name, value in items
    )
    return f'<dl class="fields">{rows}</dl>'


def _table(caption_id: str, caption: str, head: str, rows: str, css: str = "") -> str:
    """A table in a keyboard-focusable scroll region named by its caption, so a wide table scrolls
    inside the page on a phone instead of widening it."""
    table_class = f' class="{css}"' if css else ""
    return (
        f'<div class="scroll" role="region" tabindex="0" aria-labelledby="{caption_id}">'
        f'<table{table_class}><caption id="{caption_id}">{caption}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>"
    )


def message_page(title: str, message: str) -> str:
    """A short page for people: a receipt that does not exist, a refused download."""
    body = f'<div class="card"><h1>{_e(title)}</h1><p>{_e(message)}</p></div>'
    return _document(title, "Message", body)


# ----- receipt ----------------------------------------------------------------------------------


def receipt_page(receipt: dict, verdict: Verdict) -> str:
    """A receipt for people: what the security audit needs, then what finance bills."""
    receipt_id = receipt.get("receipt_id")
    issued_at = receipt.get("issued_at")
    caller = _obj(receipt.get("caller"))
    channel = str(caller.get("channel") or "")
    intro = (
        f'<h1>Receipt <span class="id">{_e(receipt_id)}</span></h1>'
        '<p class="meta">'
        f"<span>Status {_status(receipt.get('status'))}</span>"
        f"<span>Issued <strong>{_time(issued_at)}</strong></span>"
        f"<span>Via <strong>{_e(CHANNELS.get(channel, channel) or 'unknown channel')}</strong></span>"
        "</p>"
    )
    body = intro + _audit_section(receipt, verdict) + _billing_section(receipt)
    footer = (
        f"<p>Receipt format version {_e(receipt.get('version'))} \u00b7 operation "
        f"<code>{_e(receipt.get('operation'))}</code></p>"
        "<p>This page shows the stored JSON receipt; clients that ask for "
        "<code>application/json</code> at this address get its exact bytes. The store's public keys "
        f'are at <a href="{JWKS_PATH}">{JWKS_PATH}</a>.</p>'
    )
    return _document(f"Receipt {receipt_id}", "Receipt", body, footer)


def _audit_section(receipt: dict, verdict: Verdict) -> str:
    checks = [c for c in receipt.get("checks") or [] if isinstance(c, dict)]
    idempotency = next((c for c in checks if c.get("name") == "idempotency"), None)
    caller = _obj(receipt.get("caller"))
    buyer = _obj(receipt.get("buyer"))
    download = _obj(receipt.get("download"))
    signature = _obj(receipt.get("signature"))
    channel = str(caller.get("channel") or "")

    parts = ['<section class="card" aria-labelledby="audit"><h2 id="audit">Security audit</h2>']
    error = receipt.get("error")
    if isinstance(error, dict):
        parts.append(_error_block(error))
    parts.append(_signature_block(verdict, signature))

    rows = "".join(
        "<tr>"
        f'<th scope="row">{_e(CHECK_LABELS.get(str(c.get("name")), c.get("name")))}'
        f'<span class="name"><code>{_e(c.get("name"))}</code></span></th>'
        f"<td>{_result(c.get('result'))}</td>"
        f"<td>{_e(c.get('detail'))}</td>"
        "</tr>"
        for c in checks
    )
    head = '<th scope="col">Check</th><th scope="col">Result</th><th scope="col">Detail</th>'
    caption = f"The {len(checks)} runtime checks of this purchase, in the order they run"
    parts.append('<h3 id="checks-heading">Runtime checks</h3>')
    parts.append(_table("checks-caption", _e(caption), head, rows, "stack"))

    if idempotency is None:
        outcome = '<span class="note">Not recorded</span>'
    else:
        outcome = f"{_result(idempotency.get('result'))} {_e(idempotency.get('detail'))}"
    buyer_hint = _text(buyer.get("hint"), "Not recorded (no buyer was identified)")
    parts.append('<h3 id="request-heading">Request</h3>')
    parts.append(
        _fields(
            [
                ("Status", _status(receipt.get("status"))),
                ("Idempotency outcome", outcome),
                ("Caller channel", _e(CHANNELS.get(channel, channel)) or _text(None)),
                ("User agent", _code(caller.get("user_agent"), "None sent")),
                ("Issued at", _time(receipt.get("issued_at"))),
                ("Download token expires", _time(download.get("expires_at"), missing="No token issued")),
                ("Download token id", _code(download.get("token_id"), "No token issued")),
                ("Buyer (masked)", buyer_hint),
                ("Buyer id (keyed hash)", _code(buyer.get("id"), "Not recorded")),
            ]
        )
    )
    parts.append("</section>")
    return "".join(parts)


def _signature_block(verdict: Verdict, signature: dict) -> str:
    verified = _badge("\u2713", "Verified", "pass")
    status = verified if verdict.valid else _badge("\u2717", "Not verified", "fail")
    items = [
        ("Verification", f'<span id="signature-status">{status}</span>'),
        ("Algorithm", _code(signature.get("alg"), "None")),
        ("Key id", _code(verdict.kid or signature.get("kid"), "None")),
        ("Checked by the server", _e(verdict.reason) or _text(None)),
    ]
    return '<h3 id="signature-heading">Signature</h3>' + _fields(items)


def _error_block(error: dict) -> str:
    items = [
        ("Error code", _code(error.get("code"))),
        ("Message", _text(error.get("message"))),
    ]
    if error.get("retry_after_seconds") is not None:
        items.append(("Retry after", f"{_e(error.get('retry_after_seconds'))} seconds"))
    return (
        '<h3 id="error-heading">Why this purchase did not complete</h3>'
        f'<div class="alert">{_fields(items)}</div>'
    )


def _billing_section(receipt: dict) -> str:
    bundle = _obj(receipt.get("bundle"))
    billing = _obj(receipt.get("billing"))
    items = [
        ("Bundle", _text(bundle.get("title"), "No bundle")),
        ("Bundle id", _code(bundle.get("id"), "No bundle")),
        ("Amount", f'<span class="big">{_money(billing.get("amount"), billing.get("currency"))}</span>'),
        ("Currency", _text(billing.get("currency"))),
        (
            "Cost estimate",
            f'<span class="big">{_money(billing.get("cost_estimate"), billing.get("cost_currency"))}</span>',
        ),
        ("Cost currency", _text(billing.get("cost_currency"))),
        ("Receipt id", _code(receipt.get("receipt_id"))),
        ("Issued at", _time(receipt.get("issued_at"))),
    ]
    return (
        '<section class="card keep" aria-labelledby="billing"><h2 id="billing">Finance billing view</h2>'
        f"{_fields(items)}</section>"
    )


# ----- a day's receipts -------------------------------------------------------------------------


def day_page(listing: DayListing, page_size: int, code: str | None = None) -> str:
    """Finance: one page of a day's receipts, with the whole day's totals and a next-page link.
    `code` is the function key the page was opened with on Azure; its links carry it on."""
    day = listing.date
    body = (
        f"<h1>Receipts of {_time_day(day)}</h1>"
        + _day_links(day, page_size, code)
        + _totals_section(listing)
        + _receipts_section(listing, page_size, code)
    )
    footer = (
        "<p>Totals cover the whole day (UTC); the table shows one page of its receipts, "
        "earliest issued first.</p>"
    )
    return _document(f"Receipts of {day}", "Finance", body, footer)


def _time_day(day: str) -> str:
    try:
        date.fromisoformat(day)
    except (TypeError, ValueError):
        return _e(day)
    return f'<time datetime="{_e(day)}">{_e(day)}</time>'


def _query(**params: object) -> str:
    return "?" + urlencode({k: str(v) for k, v in params.items() if v is not None})


def _day_links(day: str, page_size: int, code: str | None) -> str:
    """Links to the day before and the day after; the calendar's first and last days (0001-01-01,
    9999-12-31) have only the one that exists."""
    try:
        current = date.fromisoformat(day)
    except (TypeError, ValueError):
        return ""
    links = []
    if current > date.min:
        previous = (current - timedelta(days=1)).isoformat()
        links.append(
            f'<a href="{_e(_query(date=previous, page_size=page_size, code=code))}">'
            f'<span aria-hidden="true">\u2190 </span>Previous day ({previous})</a>'
        )
    if current < date.max:
        following = (current + timedelta(days=1)).isoformat()
        links.append(
            f'<a href="{_e(_query(date=following, page_size=page_size, code=code))}">'
            f'Next day ({following})<span aria-hidden="true"> \u2192</span></a>'
        )
    return f'<nav class="days" aria-label="Other days">{"".join(links)}</nav>'


def _cost_unit(entries: list[LedgerEntry]) -> str:
    """The one cost currency of the listed receipts, or "" when there are none or several."""
    units = {entry.cost_currency for entry in entries}
    return units.pop() if len(units) == 1 else ""


def _totals_section(listing: DayListing) -> str:
    unit = _cost_unit(listing.receipts)
    items = [("Receipts", f'<span class="big">{_e(listing.count)}</span>')]
    for currency, sums in listing.totals.items():
        amount, cost = _money(sums.get("amount"), currency), _money(sums.get("cost_estimate"), unit)
        items.append((f"Amount in {currency}", f'<span class="big">{amount}</span>'))
        items.append((f"Cost estimate of {currency} receipts", f'<span class="big">{cost}</span>'))
    return (
        '<section class="card" aria-labelledby="totals"><h2 id="totals">Day totals</h2>'
        f"{_fields(items)}</section>"
    )


def _receipts_section(listing: DayListing, page_size: int, code: str | None) -> str:
    parts = ['<section class="card" aria-labelledby="receipts"><h2 id="receipts">Receipts</h2>']
    if not listing.receipts:
        parts.append(f"<p>No receipts were issued on {_e(listing.date)}.</p>")
    else:
        rows = "".join(_receipt_row(entry) for entry in listing.receipts)
        head = (
            '<th scope="col">Receipt</th><th scope="col">Issued at</th><th scope="col">Bundle</th>'
            '<th scope="col" class="num">Amount</th><th scope="col">Currency</th>'
            '<th scope="col" class="num">Cost estimate</th>'
        )
        caption = f"{len(listing.receipts)} of the {_e(listing.count)} receipts issued on {_e(listing.date)}"
        parts.append('<p class="note hint">Scroll the table sideways to see every column.</p>')
        parts.append(_table("receipts-caption", caption, head, rows, "wide"))
    if listing.next_cursor:
        href = _query(date=listing.date, page_size=page_size, cursor=listing.next_cursor, code=code)
        parts.append(
            '<nav class="pager" aria-label="Pagination">'
            f'<a href="{_e(href)}" rel="next">Next page<span aria-hidden="true"> \u2192</span></a></nav>'
        )
    parts.append("</section>")
    return "".join(parts)


def _receipt_row(entry: LedgerEntry) -> str:
    link = f"/api/receipts/{quote(entry.receipt_id, safe='')}"
    bundle = _text(entry.bundle_title, "No bundle")
    if entry.bundle_id:
        bundle += f'<span class="name"><code>{_e(entry.bundle_id)}</code></span>'
    return (
        f'<tr><th scope="row"><a href="{_e(link)}"><code>{_e(entry.receipt_id)}</code></a></th>'
        f"<td>{_time(entry.issued_at, clock_only=True)}</td>"
        f"<td>{bundle}</td>"
        f'<td class="num"><span class="amt">{_e(entry.amount)}</span></td>'
        f"<td>{_e(entry.currency)}</td>"
        f'<td class="num">{_money(entry.cost_estimate, entry.cost_currency)}</td></tr>'
    )
