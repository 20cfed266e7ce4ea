"""The HTTP endpoints as plain functions: a `Request` in, an `Answer` out.

Each endpoint is one route's rules (status codes, headers, caching, content negotiation) over the
primitives every protocol adapter shares (`shared.protocols.http`), which this module offers too.
`Services` is what the endpoints are given; `shared.runtime` builds it once per process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from shared import __version__
from shared.config.errors import (
    Forbidden,
    InvalidRequest,
    MethodNotAllowed,
    NotConfigured,
    NotFound,
    StorageOutage,
    StorefrontError,
    StoreUnavailable,
)
from shared.protocols import pages
from shared.protocols.http import (
    JSON_TYPE,
    Answer,
    Request,
    Usage,
    check_json_declared,
    error_answer,
    html_answer,
    json_answer,
    nearest,
    origin_allowed,
    parse_body,
    purchase_call,
)
from shared.protocols.readiness import assess
from shared.purchase import catalog
from shared.purchase.call import Outcome
from shared.purchase.receipt import signatures
from shared.purchase.receipt.document import is_receipt_id
from shared.purchase.storefront import Storefront

if TYPE_CHECKING:
    from shared.config.keys import KeySet
    from shared.config.settings import Settings
    from shared.protocols.agents import AgentVerifier
    from shared.protocols.downloads import Downloads
    from shared.protocols.ucp.negotiation import Platforms
    from shared.protocols.ucp.replay import Replays
    from shared.protocols.ucp.sessions import CheckoutSessions
    from shared.protocols.ucp.webhooks import Webhooks
    from shared.purchase.contacts import ContactDrainer
    from shared.seams.card_dates import TableCardDates
    from shared.seams.ledger import TableLedger
    from shared.seams.storage_probe import StorageProbe


@dataclass(frozen=True)
class Services:
    settings: Settings
    storefront: Storefront
    downloads: Downloads
    ledger: TableLedger
    keys: Callable[[], KeySet]
    storage: StorageProbe
    drainer: ContactDrainer
    platforms: Platforms  # UCP platforms' profiles, for negotiating every UCP request
    agents: AgentVerifier | None = None  # verifies Web Bot Auth signatures on the purchase doors
    checkouts: CheckoutSessions | None = None  # UCP checkout sessions, completed by the purchase
    replays: Replays | None = None  # UCP's Idempotency-Key rule on the checkout operations
    webhooks: Webhooks | None = None  # UCP order events to the platforms that ask for them
    card_dates: TableCardDates | None = None  # when the agent card became current (Last-Modified)


# Every method Azure lets a trigger list. Each route lists them all, because Azure answers a
# method a trigger does not list with an empty 404; the route answers 405 with Allow instead.
EVERY_METHOD = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
DOCS = "README.md#endpoints"
OPENAPI_PATH = "/api/openapi.json"
# What an unknown path is told exists: every route but the catch-all that answers it.
ENDPOINTS = (
    "POST /api/a2a/mcp",
    "POST /api/a2a/purchase",
    "POST /api/a2a",
    "GET /.well-known/agent-card.json",
    "GET /api/bundles",
    "GET /api/receipts/{receipt_id}",
    "GET /api/receipts?date=YYYY-MM-DD",
    "GET /.well-known/jwks.json",
    "GET /api/.well-known/jwks.json",
    "GET /api/download/{token}",
    f"GET {OPENAPI_PATH}",
    "GET /api/health",
    "GET /.well-known/ucp",
    "POST /ucp/catalog/{operation}",
    "POST /ucp/checkout-sessions",
    "GET /ucp/checkout-sessions/{id}",
    "POST /ucp/checkout-sessions/{id}/{action}",
    "GET /ucp/orders/{id}",
    "POST /ucp/mcp",
)


PURCHASE_USAGE = Usage(
    ("POST",), 'POST a JSON body such as {"email": "ada@example.org"} with Content-Type: application/json'
)
RECEIPT_USAGE = Usage(("GET", "HEAD"), "GET it for the receipt's JSON, or its page with Accept: text/html")
DAY_USAGE = Usage(("GET", "HEAD"), "GET it with ?date=YYYY-MM-DD for that day's receipts")
JWKS_USAGE = Usage(("GET", "HEAD"), "GET it for the store's public keys")
BUNDLES_USAGE = Usage(("GET", "HEAD"), "GET it for the free bundles and the bundle_id of each")
DOWNLOAD_USAGE = Usage(("GET", "HEAD"), "open the link from the email, which sends GET")
HEALTH_USAGE = Usage(("GET", "HEAD"), "GET it to check that the app can serve")


def wrong_method(req: Request, usage: Usage) -> Answer | None:
    """405 with Allow and a JSON body saying how to call the route, or None for a method it serves."""
    if req.method.upper() in usage.allow:
        return None
    allow = ", ".join(usage.allow)
    refusal = MethodNotAllowed(f"this endpoint answers {allow} only; {usage.how}")
    return error_answer(refusal, {"Allow": allow}, allow=list(usage.allow), docs=DOCS)


def unknown_route(req: Request) -> Answer:
    """The app's 404 for a path no route serves (every method): JSON naming the endpoints, with
    the closest one when the path is near one (/api/purchase: POST /api/a2a/purchase)."""
    path = "/" + req.route_params.get("path", "").strip("/")
    paths = {endpoint.split(" ")[1].split("?")[0]: endpoint for endpoint in ENDPOINTS}
    near = nearest(path, paths)
    hint = f"did you mean {paths[near]}? " if near else ""
    refusal = NotFound(
        f"no endpoint at this path; {hint}the endpoints are listed in `endpoints` and described "
        f"by the OpenAPI document at {OPENAPI_PATH}"
    )
    return error_answer(refusal, endpoints=list(ENDPOINTS), openapi=OPENAPI_PATH, docs=DOCS)


def outcome_answer(outcome: Outcome) -> Answer:
    headers = {"Content-Type": JSON_TYPE}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    if outcome.retry_after is not None:
        headers["Retry-After"] = str(outcome.retry_after)
    return Answer(outcome.status, outcome.body, headers)


def purchase(req: Request, store: Storefront, settings: Settings) -> Answer:
    if not origin_allowed(req.header("origin"), settings.allowed_origins):
        return error_answer(Forbidden("requests from this Origin are not allowed", code="forbidden_origin"))
    call = purchase_call(req, "http", None, settings)
    try:
        check_json_declared(req)
        arguments = parse_body(req.body)
    except StorefrontError as exc:
        return outcome_answer(store.refuse(call, exc))
    return outcome_answer(store.purchase(replace(call, arguments=arguments)))


def receipt(req: Request, services: Services) -> Answer:
    """One receipt: the stored bytes for agents, a page for people. Read-only by construction."""
    receipt_id = req.route_params.get("receipt_id", "")
    if not is_receipt_id(receipt_id):
        return _not_found(req)
    try:
        body = services.storefront.stored_receipt(receipt_id)
    except StorageOutage:
        return error_answer(StoreUnavailable("receipt storage is unreachable", retry_after=5))
    if body is None:
        return _not_found(req)
    if req.wants_html():
        page = pages.receipt_page(json.loads(body), _verdict(body, services))
        return html_answer(200, page, {"Cache-Control": "private, no-store"})
    return Answer(
        200, body, {"Content-Type": JSON_TYPE, "Cache-Control": "private, max-age=3600", "Vary": "Accept"}
    )


def _verdict(body: bytes, services: Services) -> signatures.Verdict:
    try:
        jwks = services.keys().jwks()
    except NotConfigured:
        return signatures.Verdict(False, "the store has no signing key configured")
    return signatures.verify(body, jwks)


def _not_found(req: Request) -> Answer:
    if req.wants_html():
        return html_answer(404, pages.message_page("Receipt not found", "No receipt has this id."))
    return error_answer(NotFound("no receipt with this id"))


def receipts_of_day(req: Request, services: Services, today: str) -> Answer:
    """Finance: one day's receipts with the day's totals, paginated, as JSON or an HTML table."""
    raw_size = req.params.get("page_size", "50")
    # int() would take " 5", "+5", "1_0" and "٥", and raise past its 4,300-digit limit.
    if not (raw_size.isascii() and raw_size.isdigit() and len(raw_size) <= 6):
        return error_answer(InvalidRequest("page_size must be an integer", code="invalid_page_size"))
    page_size = int(raw_size)
    try:
        listing = services.ledger.day(
            req.params.get("date", today), page_size=page_size, cursor=req.params.get("cursor")
        )
    except StorefrontError as exc:
        return error_answer(exc)
    except StorageOutage:
        return error_answer(StoreUnavailable("ledger storage is unreachable", retry_after=5))
    if req.wants_html():
        page = pages.day_page(listing, page_size, req.params.get("code"))
        return html_answer(200, page, {"Cache-Control": "private, no-store"})
    return json_answer(200, listing.as_dict(), {"Cache-Control": "private, no-store", "Vary": "Accept"})


def jwks(services: Services) -> Answer:
    """The public keys that verify receipts and download tokens (current and retired)."""
    try:
        keys = services.keys().jwks()
    except NotConfigured:
        keys = {"keys": []}
    return json_answer(200, keys, {"Cache-Control": "public, max-age=300"})


def bundles() -> Answer:
    """The catalog, the same document as the MCP tool list_bundles: built from memory, never from
    storage, so a flood of listings costs no storage call and uses no purchase quota. It changes only
    with a deployment; five minutes of caching lets agents and proxies skip repeat calls."""
    return json_answer(200, catalog.listing(), {"Cache-Control": "public, max-age=300"})


def download(req: Request, services: Services) -> Answer:
    try:
        found = services.downloads.redeem(req.route_params.get("token", ""))
    except StorefrontError as exc:
        headers = {"Cache-Control": "no-store"}
        if exc.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="storefront-download", error="invalid_token"'
        if req.wants_html():
            return html_answer(exc.status, pages.message_page("Download refused", exc.message), headers)
        return error_answer(exc, headers)
    return Answer(
        200,
        found.body,
        {
            "Content-Type": found.content_type,
            "Content-Disposition": f'attachment; filename="{found.filename}"',
            "Cache-Control": "private, no-store",
            "X-Content-Type-Options": "nosniff",
        },
    )


def health(services: Services) -> Answer:
    """Readiness: 200 `ok` when every secret is usable, Table, Blob and the contact queue answer
    with the app's credentials and every bundle's file is uploaded; 200 `degraded` when only bundle
    files are missing (`missing_bundles`; the store sells the rest); otherwise 503 with `status`
    (`unconfigured` for a setting, `unavailable` for storage). `missing_settings` names the settings
    at fault and `problems` says each problem in words, never a value. `contacts` is the contact
    backlog (buyers waiting, the oldest's age in seconds, messages in the poison queue), null when
    the queue could not be read."""
    readiness = assess(services.settings, services.keys, services.storage)
    backlog = services.storage.backlog()
    return json_answer(
        200 if readiness.serving else 503,
        {
            "status": readiness.status,
            "version": __version__,
            "missing_settings": list(readiness.missing_settings),
            "missing_bundles": list(readiness.missing_bundles),
            "problems": list(readiness.problems + readiness.bundle_problems),
            "contacts": backlog.as_dict() if backlog is not None else None,
        },
        {"Cache-Control": "no-store"},
    )
