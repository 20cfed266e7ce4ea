"""HTML views for people: a receipt (security audit and finance billing view) and a day's
receipts for finance. Every value is escaped; pages carry no script and load nothing.
"""

from __future__ import annotations

import html

from shared.ledger import DayListing
from shared.signatures import Verdict


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _document(title: str, body: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title></head><body><main>{body}</main></body></html>"
    )


def message_page(title: str, message: str) -> str:
    return _document(title, f"<h1>{_e(title)}</h1><p>{_e(message)}</p>")


def receipt_page(receipt: dict, verdict: Verdict) -> str:
    checks = "".join(
        f"<tr><th scope='row'>{_e(c['name'])}</th><td>{_e(c['result'])}</td><td>{_e(c['detail'])}</td></tr>"
        for c in receipt.get("checks", [])
    )
    billing = receipt.get("billing", {})
    bundle = receipt.get("bundle") or {}
    body = (
        f"<h1>Receipt {_e(receipt.get('receipt_id'))}</h1>"
        "<section><h2>Security audit</h2>"
        f"<p>Signature: {'verified' if verdict.valid else 'NOT verified'} ({_e(verdict.reason)})</p>"
        f"<table><thead><tr><th>Check</th><th>Result</th><th>Detail</th></tr></thead><tbody>{checks}</tbody></table>"
        "</section><section><h2>Finance billing view</h2>"
        f"<p>{_e(bundle.get('title'))}: {_e(billing.get('amount'))} {_e(billing.get('currency'))}</p>"
        "</section>"
    )
    return _document(f"Receipt {receipt.get('receipt_id')}", body)


def day_page(listing: DayListing, page_size: int) -> str:
    rows = "".join(
        f"<tr><td>{_e(r.receipt_id)}</td><td>{_e(r.amount)}</td><td>{_e(r.cost_estimate)}</td></tr>"
        for r in listing.receipts
    )
    return _document(
        f"Receipts of {listing.date}",
        f"<h1>Receipts of {_e(listing.date)}</h1><table><tbody>{rows}</tbody></table>",
    )
