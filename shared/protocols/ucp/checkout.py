"""A UCP checkout session over the store's bundles (UCP 2026-08-25, shopping/checkout/index.md):
what a create or update request may say, the session it leaves, its status and messages, and the
checkout object that answers. One bundle per checkout, once; every price and total 0; no
fulfillment and no payment handler; the buyer's email is what delivers, so without one the
checkout is `incomplete` with a recoverable `missing` at `$.buyer.email`, and an address or name
the purchase would refuse is a recoverable error at its field. A session lives 6 hours, then
reads as `canceled`. docs/ucp.md gives each rule with the spec's section."""

from __future__ import annotations

import re
from dataclasses import dataclass

from shared.config.errors import InvalidRequest, Unprocessable
from shared.protocols.ucp.catalog import VERSION, minor_units
from shared.purchase.call import iso
from shared.purchase.catalog import Bundle, find_bundle
from shared.purchase.schema import EMAIL_MAX, NAME_MAX, validate_arguments

CHECKOUT = "dev.ucp.shopping.checkout"
TTL_SECONDS = 6 * 3600  # checkout.json `expires_at`: "Default TTL is 6 hours from creation"
MAX_LINES = 10
MAX_ITEM_ID = 200
OPEN = ("incomplete", "ready_for_complete")
TERMINAL = ("completed", "canceled")
CHECKOUT_ID = re.compile(r"^chk_[a-z2-7]{26}$")


@dataclass(frozen=True)
class Line:
    bundle: Bundle
    quantity: int = 1


@dataclass(frozen=True)
class Request:
    """A create or update request as the store reads it: the bundles it names (unknown ones
    dropped, each with a message), the buyer and the messages about the request itself."""

    lines: tuple[Line, ...]
    buyer: dict[str, str]
    notes: tuple[dict, ...] = ()


@dataclass
class Session:
    id: str
    platform: str  # the keyed hash of the profile URL of the platform that created it
    status: str
    lines: list[Line]
    buyer: dict[str, str]
    created_at: float
    expires_at: float
    order: dict | None = None
    refusal: dict | None = None  # the purchase's refusal at the last complete, until the next update
    hold: str = ""  # the complete holding it (complete_in_progress) now
    held_at: float = 0.0  # when a complete first held it: its purchase key's age
    links: tuple[dict, ...] = ()  # the store's legal links (its settings; not kept with the session)

    def record(self) -> dict:
        return {
            "id": self.id,
            "platform": self.platform,
            "status": self.status,
            "lines": [{"bundle": line.bundle.id, "quantity": line.quantity} for line in self.lines],
            "buyer": self.buyer,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "order": self.order,
            "refusal": self.refusal,
            "hold": self.hold,
            "held_at": self.held_at,
        }

    @classmethod
    def from_record(cls, record: dict) -> Session:
        """The session a row holds. A bundle taken off the catalog since leaves its line out, and
        an open session's status is worked out again, so it cannot complete without one."""
        lines = [
            Line(bundle, int(line["quantity"]))
            for line in record["lines"]
            if (bundle := find_bundle(line["bundle"]))
        ]
        session = cls(
            id=record["id"],
            platform=record["platform"],
            status=record["status"],
            lines=lines,
            buyer=dict(record["buyer"]),
            created_at=float(record["created_at"]),
            expires_at=float(record["expires_at"]),
            order=record.get("order"),
            refusal=record.get("refusal"),
            hold=str(record.get("hold", "")),
            held_at=float(record.get("held_at", 0.0)),
        )
        if session.status == "ready_for_complete":
            session.status = status_of(session)
        return session

    def apply(self, request: Request) -> None:
        """An update: the request replaces the lines and the buyer (a full replacement,
        checkout/index.md "Update Checkout"), and the status follows."""
        self.lines = list(request.lines)
        self.buyer = dict(request.buyer)
        self.refusal = None
        self.status = status_of(self)

    def expired(self, now: float) -> bool:
        return self.status in OPEN and now >= self.expires_at


def read_request(body: object) -> Request:
    """The lines and buyer of a create or update body. Fields the store does not use (context,
    signals, payment, an item's title or price) are ignored: prices are the store's. Raises
    InvalidRequest for a shape UCP's schema refuses."""
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    items = body.get("line_items")
    if not isinstance(items, list) or not items:
        raise InvalidRequest("line_items must be a non-empty list")
    if len(items) > MAX_LINES:
        raise InvalidRequest(f"a checkout takes at most {MAX_LINES} line items", code="request_too_large")
    lines: list[Line] = []
    notes: list[dict] = []
    for index, item in enumerate(items):
        identifier, quantity = _line(index, item)
        bundle = find_bundle(identifier)
        if bundle is None:
            notes.append(
                error(
                    "item_unavailable", f"no bundle has the id {identifier!r}, so that line item was left out"
                )
            )
            continue
        if quantity > 1:
            path = f"$.line_items[{len(lines)}].quantity"
            notes.append(warning("quantity_adjusted", "a bundle is sent once: the quantity is 1", path))
        lines.append(Line(bundle, 1))
    return Request(tuple(lines), _buyer(body.get("buyer")), tuple(notes))


def _line(index: int, item: object) -> tuple[str, int]:
    where = f"line_items[{index}]"
    inner = item.get("item") if isinstance(item, dict) else None
    identifier = inner.get("id") if isinstance(inner, dict) else None
    if not isinstance(identifier, str) or not 0 < len(identifier) <= MAX_ITEM_ID:
        raise InvalidRequest(f"{where}.item.id must be a string of 1-{MAX_ITEM_ID} characters")
    quantity = item.get("quantity") if isinstance(item, dict) else None
    if not isinstance(quantity, int) or isinstance(quantity, bool) or quantity < 1:
        raise InvalidRequest(f"{where}.quantity must be an integer of at least 1")
    return identifier, quantity


def _buyer(buyer: object) -> dict[str, str]:
    """The buyer's email and name as sent; other members (a phone number) are not kept."""
    if buyer is None:
        return {}
    if not isinstance(buyer, dict):
        raise InvalidRequest("buyer must be an object")
    kept: dict[str, str] = {}
    for name, longest in (("email", EMAIL_MAX), ("first_name", NAME_MAX), ("last_name", NAME_MAX)):
        value = buyer.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > longest:
            raise InvalidRequest(f"buyer.{name} must be a string of at most {longest} characters")
        kept[name] = value
    return kept


def full_name(buyer: dict[str, str]) -> str:
    return " ".join(
        part.strip() for part in (buyer.get("first_name", ""), buyer.get("last_name", "")) if part.strip()
    )


def problems(session: Session) -> list[dict]:
    """The errors that keep the session from completing, each recoverable by an update."""
    found: list[dict] = []
    if not session.lines:
        found.append(error("missing", "the checkout names no bundle: add one line item", "$.line_items"))
    elif len(session.lines) > 1:
        found.append(
            error("too_many_line_items", "a checkout sends one bundle: keep one line item", "$.line_items")
        )
    email = session.buyer.get("email", "").strip()
    if not email:
        found.append(error("missing", "an email address is needed to send the bundle", "$.buyer.email"))
        return found
    name = full_name(session.buyer)
    if len(name) > NAME_MAX:
        found.append(
            error("invalid_name", f"the buyer's name must be at most {NAME_MAX} characters", "$.buyer")
        )
        return found
    try:
        validate_arguments({"email": email, "name": name})
    except (Unprocessable, InvalidRequest) as exc:
        path = "$.buyer.email" if exc.code == "invalid_email" else "$.buyer"
        found.append(error(exc.code, exc.message, path))
    return found


def status_of(session: Session) -> str:
    return "incomplete" if problems(session) else "ready_for_complete"


def error(code: str, content: str, path: str | None = None, severity: str = "recoverable") -> dict:
    message = {"type": "error", "code": code, "content": content, "severity": severity}
    return {**message, "path": path} if path else message


def warning(code: str, content: str, path: str | None = None) -> dict:
    message = {"type": "warning", "code": code, "content": content}
    return {**message, "path": path} if path else message


def envelope(status: str = "success") -> dict:
    return {
        "version": VERSION,
        "status": status,
        "capabilities": {CHECKOUT: [{"version": VERSION}]},
        "payment_handlers": {},
    }


def not_found(content: str = "no checkout session has this id") -> dict:
    """The error response when there is no session to act on (checkout/index.md "Error Handling")."""
    return {
        "ucp": {"version": VERSION, "status": "error"},
        "messages": [error("not_found", content, severity="unrecoverable")],
    }


def line_items(session: Session) -> list[dict]:
    """The session's lines as checkout and order entities both start them: id, item, totals."""
    return [
        {
            "id": f"li_{index + 1}",
            "item": {"id": line.bundle.id, "title": line.bundle.title, "price": minor_units(line.bundle)},
            "totals": totals(minor_units(line.bundle) * line.quantity),
        }
        for index, line in enumerate(session.lines)
    ]


def currency_of(session: Session) -> str:
    return session.lines[0].bundle.currency if session.lines else "USD"


def total_of(lines: list[dict]) -> list[dict]:
    return totals(sum(line["totals"][1]["amount"] for line in lines))


def checkout(session: Session, notes: tuple[dict, ...] = ()) -> dict:
    """The checkout object (shopping/checkout.json) for the session, with the messages about the
    request that produced it (`notes`) before those about the session."""
    lines = [
        {**item, "quantity": line.quantity}
        for item, line in zip(line_items(session), session.lines, strict=True)
    ]
    answer: dict = {
        "ucp": envelope(),
        "id": session.id,
        "status": session.status,
        "currency": currency_of(session),
        "line_items": lines,
        "totals": total_of(lines),
        "links": list(session.links),
    }
    if session.buyer:
        answer["buyer"] = dict(session.buyer)
    messages = list(notes)
    if session.status in OPEN:
        messages += problems(session)
        answer["expires_at"] = iso(int(session.expires_at))
    if session.refusal and session.status in OPEN:
        messages.append(session.refusal)
    if messages:
        answer["messages"] = messages
    if session.order:
        answer["order"] = {key: session.order[key] for key in ("id", "label", "permalink_url")}
    return answer


def legal_links(terms_url: str, privacy_url: str) -> tuple[dict, ...]:
    """The checkout's `links` (checkout.json: "Mandatory for legal compliance"): the store's terms
    of service and privacy policy, those the operator has set."""
    found = (("terms_of_service", terms_url), ("privacy_policy", privacy_url))
    return tuple({"type": kind, "url": url} for kind, url in found if url)


def totals(amount: int) -> list[dict]:
    """Exactly one subtotal and one total (common/types/totals.json)."""
    return [{"type": "subtotal", "amount": amount}, {"type": "total", "amount": amount}]
