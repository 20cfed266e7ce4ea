"""The UCP order a completed checkout becomes (UCP 2026-08-25, shopping/order/index.md): its id is
the checkout's own under another prefix, so it needs no row of its own; its line is fulfilled
(the purchase answers only once Brevo has taken the email); its one expectation is a digital
delivery by email; its permalink is the signed receipt. Also: where a platform's profile asks
order events to be sent (its order capability's `config.webhook_url`, "Webhook URL Configuration")."""

from __future__ import annotations

from shared.protocols.ucp.catalog import VERSION
from shared.protocols.ucp.checkout import Session, currency_of, error, line_items, total_of

ORDER = "dev.ucp.shopping.order"
PREFIX = "ord_"


def order_id(checkout_id: str) -> str:
    return PREFIX + checkout_id.removeprefix("chk_")


def checkout_id(order: str) -> str:
    return "chk_" + order.removeprefix(PREFIX) if order.startswith(PREFIX) else ""


def envelope(status: str = "success") -> dict:
    return {"version": VERSION, "status": status, "capabilities": {ORDER: [{"version": VERSION}]}}


def not_found() -> dict:
    """The error response for an order there is none of, or not for this platform (order/rest.md
    "Not Found": one answer for both, so an order id tells a stranger nothing)."""
    message = error("not_found", "no order has this id", severity="unrecoverable")
    return {"ucp": envelope("error"), "messages": [message]}


def entity(session: Session) -> dict:
    """The full order entity (shopping/order.json) of a completed session."""
    placed = session.order or {}
    lines = [
        {**item, "quantity": {"original": n, "total": n, "fulfilled": n}, "status": "fulfilled"}
        for item, n in zip(line_items(session), (line.quantity for line in session.lines), strict=True)
    ]
    expectation = {
        "id": "exp_1",
        "line_items": [{"id": line["id"], "quantity": line["quantity"]["total"]} for line in lines],
        "method_type": "digital",
        "destination": {},  # postal_address has no required field: an email delivery has none
        "description": "A download link emailed to the buyer",
        "fulfillable_on": "now",
    }
    return {
        "ucp": envelope(),
        "id": order_id(session.id),
        "label": str(placed.get("label", "")),
        "checkout_id": session.id,
        "permalink_url": str(placed.get("permalink_url", "")),
        "currency": currency_of(session),
        "line_items": lines,
        "fulfillment": {"expectations": [expectation]},
        "totals": total_of(lines),
    }


def webhook_url(profile: dict) -> str | None:
    """The platform's webhook URL for order events at this version, if its profile gives one."""
    ucp = profile.get("ucp")
    capabilities = ucp.get("capabilities") if isinstance(ucp, dict) else None
    entries = capabilities.get(ORDER) if isinstance(capabilities, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        config = entry.get("config") if isinstance(entry, dict) else None
        url = config.get("webhook_url") if isinstance(config, dict) else None
        if entry.get("version") == VERSION and isinstance(url, str) and url:
            return url
    return None
