"""UCP's catalog capabilities over the store's bundles (UCP 2026-08-25, shopping/catalog): search,
lookup and get-product, each a bundle a product with one variant of the same id (so a variant id
is what a checkout's line item names), price 0. Plain functions from a request body to the
answer's status and JSON; `shared.protocols.ucp.negotiation` wraps them in the UCP envelope."""

from __future__ import annotations

import base64
import binascii

from shared.purchase.catalog import BUNDLES, Bundle

VERSION = "2026-08-25"
SEARCH = "dev.ucp.shopping.catalog.search"
LOOKUP = "dev.ucp.shopping.catalog.lookup"
DEFAULT_LIMIT, MAX_LIMIT = 10, 50  # catalog/search.md "Pagination": default 10, may clamp
MAX_BATCH = 50  # identifiers one lookup takes (catalog/lookup.md "Batch Size")


def envelope(capability: str, status: str = "success") -> dict:
    """The `ucp` member of a catalog answer: the version and the one capability used."""
    return {"version": VERSION, "status": status, "capabilities": {capability: [{"version": VERSION}]}}


def error(capability: str, code: str, content: str, severity: str = "unrecoverable") -> dict:
    message = {"type": "error", "code": code, "severity": severity, "content": content}
    return {"ucp": envelope(capability, "error"), "messages": [message]}


def product(bundle: Bundle, matched: str | None = None) -> dict:
    """A bundle as a UCP product (types/product.json) with its one variant; `matched` is the
    identifier a lookup asked for, recorded in the variant's `inputs` (lookup.md "Client
    Correlation")."""
    price = {"amount": minor_units(bundle), "currency": bundle.currency}
    variant: dict = {
        "id": bundle.id,
        "title": bundle.title,
        "description": {"plain": bundle.description},
        "price": price,
        "availability": {"available": True},
    }
    if matched is not None:
        variant["inputs"] = [{"id": matched, "match": "exact"}]
    return {
        "id": bundle.id,
        "title": bundle.title,
        "description": {"plain": bundle.description},
        "price_range": {"min": price, "max": price},
        "variants": [variant],
    }


def search(body: object) -> tuple[int, dict]:
    """POST /catalog/search: a `query` (`*` is every bundle) or `filters`, one is required."""
    if not isinstance(body, dict) or (not body.get("query") and not body.get("filters")):
        return 400, error(SEARCH, "invalid_request", "a search needs a query or filters")
    query = body.get("query") or ""
    if not isinstance(query, str):
        return 400, error(SEARCH, "invalid_request", "query must be a string")
    found = [b for b in BUNDLES.values() if query == "*" or _matches(b, query)]
    found = [b for b in found if _within_price(b, body.get("filters"))]
    start, limit = _page(body.get("pagination"))
    page = found[start : start + limit]
    pagination: dict = {"has_next_page": start + limit < len(found), "total_count": len(found)}
    if pagination["has_next_page"]:
        pagination["cursor"] = base64.urlsafe_b64encode(str(start + limit).encode()).decode()
    return 200, {"ucp": envelope(SEARCH), "products": [product(b) for b in page], "pagination": pagination}


def lookup(body: object) -> tuple[int, dict]:
    """POST /catalog/lookup: every bundle among `ids`, once each, in the order first asked."""
    ids = body.get("ids") if isinstance(body, dict) else None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        return 400, error(LOOKUP, "invalid_request", "ids must be a non-empty list of strings")
    if len(ids) > MAX_BATCH:
        return 400, error(LOOKUP, "request_too_large", f"a lookup takes at most {MAX_BATCH} ids")
    found: dict[str, dict] = {}
    for identifier in ids:
        bundle = BUNDLES.get(identifier)
        if bundle is not None and bundle.id not in found:
            found[bundle.id] = product(bundle, matched=identifier)
    return 200, {"ucp": envelope(LOOKUP), "products": list(found.values())}


def get_product(body: object) -> tuple[int, dict]:
    """POST /catalog/product: one bundle by its id; an unknown id is a 200 error (rest.md)."""
    identifier = body.get("id") if isinstance(body, dict) else None
    if not isinstance(identifier, str) or not identifier:
        return 400, error(LOOKUP, "invalid_request", "id must be a string")
    bundle = BUNDLES.get(identifier)
    if bundle is None:
        return 200, error(LOOKUP, "not_found", "no product has this id")
    return 200, {"ucp": envelope(LOOKUP), "product": product(bundle)}


def minor_units(bundle: Bundle) -> int:
    """The price in minor units (cents), as UCP's Price carries it; "0.00" is 0."""
    whole, _, cents = bundle.price.partition(".")
    return int(whole) * 100 + int((cents + "00")[:2])


def _matches(bundle: Bundle, query: str) -> bool:
    words = query.casefold().split()
    text = f"{bundle.id} {bundle.title} {bundle.description}".casefold()
    return all(word in text for word in words)


def _within_price(bundle: Bundle, filters: object) -> bool:
    price = filters.get("price") if isinstance(filters, dict) else None
    if not isinstance(price, dict):
        return True
    low, high = price.get("min"), price.get("max")
    amount = minor_units(bundle)
    return (not isinstance(low, int) or amount >= low) and (not isinstance(high, int) or amount <= high)


def _page(pagination: object) -> tuple[int, int]:
    """(first index, page size) from `pagination`: an unreadable cursor starts at the beginning."""
    if not isinstance(pagination, dict):
        return 0, DEFAULT_LIMIT
    limit = pagination.get("limit")
    size = (
        min(limit, MAX_LIMIT)
        if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0
        else DEFAULT_LIMIT
    )
    cursor = pagination.get("cursor")
    try:
        start = int(base64.urlsafe_b64decode(cursor.encode()).decode()) if isinstance(cursor, str) else 0
    except (ValueError, binascii.Error, UnicodeError):
        start = 0
    return max(start, 0), size
