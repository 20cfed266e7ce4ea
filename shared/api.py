"""The HTTP endpoints as plain functions: a `Request` in, an `Answer` out.

`function_app.py` converts to and from `azure.functions` types and nothing else, so every rule of
the HTTP surface (origin allowlist, body limits, status codes, headers) lives and is tested here.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from shared import __version__, catalog, pages, signatures
from shared.errors import (
    Forbidden,
    InvalidRequest,
    MethodNotAllowed,
    NotConfigured,
    NotFound,
    PayloadTooLarge,
    StorageDown,
    StorefrontError,
    StoreUnavailable,
    UnsupportedMediaType,
)
from shared.governance import client_address
from shared.printable import printable
from shared.purchase import Caller, Outcome, PurchaseCall, Storefront
from shared.readiness import assess
from shared.receipts import is_receipt_id
from shared.settings import Settings

if TYPE_CHECKING:
    from shared.runtime import Services

MAX_BODY_BYTES = 64 * 1024
# Far below the interpreter's recursion limit, which later code (hashing, storing and sending the
# arguments) would otherwise reach with a body that parsed just under it.
MAX_JSON_DEPTH = 64
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
JSON_TYPE = "application/json"
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
)


@dataclass(frozen=True)
class Request:
    method: str
    headers: Mapping[str, str]
    body: bytes = b""
    route_params: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def wants_html(self) -> bool:
        """True when the client prefers HTML to JSON (a browser); JSON is the default."""
        return _quality(self.header("accept"), "text/html") > _quality(self.header("accept"), JSON_TYPE)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Usage:
    """How a route is called: the methods it serves (HEAD is served as GET) and, for a caller who
    used another one, how to call it instead."""

    allow: tuple[str, ...]
    how: str


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
    near = difflib.get_close_matches(path.lower(), paths, n=1, cutoff=0.75)
    hint = f"did you mean {paths[near[0]]}? " if near else ""
    refusal = NotFound(
        f"no endpoint at this path; {hint}the endpoints are listed in `endpoints` and described "
        f"by the OpenAPI document at {OPENAPI_PATH}"
    )
    return error_answer(refusal, endpoints=list(ENDPOINTS), openapi=OPENAPI_PATH, docs=DOCS)


def json_answer(status: int, payload: object, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, json.dumps(payload).encode(), {"Content-Type": JSON_TYPE, **(headers or {})})


def error_answer(exc: StorefrontError, headers: dict[str, str] | None = None, **extra: object) -> Answer:
    """An error of the tree as JSON, `{"error": {"code", "message", ...extra}}`, with the status
    its class gives it (shared/errors.py) and Retry-After when it carries one."""
    if exc.retry_after is not None:
        headers = {"Retry-After": str(exc.retry_after), **(headers or {})}
    return json_answer(exc.status, {"error": {"code": exc.code, "message": exc.message, **extra}}, headers)


HTML_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def html_answer(status: int, page: str, headers: dict[str, str] | None = None) -> Answer:
    return Answer(status, page.encode(), {**HTML_HEADERS, "Vary": "Accept", **(headers or {})})


def _quality(accept: str | None, media_type: str) -> float:
    """The q-value `accept` gives `media_type` (exact match, then type/*, then */*)."""
    if not accept:
        return 1.0 if media_type == JSON_TYPE else 0.0
    kind = media_type.split("/")[0] + "/*"
    best: dict[str, float] = {}
    for part in accept.split(","):
        name, *options = (piece.strip() for piece in part.split(";"))
        q = 1.0
        for option in options:
            if option.lower().startswith("q="):
                try:
                    q = min(max(float(option[2:]), 0.0), 1.0)
                except ValueError:
                    q = 0.0
                if q != q:  # NaN
                    q = 0.0
        best[name.lower()] = max(q, best.get(name.lower(), 0.0))
    for candidate in (media_type, kind, "*/*"):
        if candidate in best:
            return best[candidate]
    return 0.0


def origin_allowed(origin: str | None, extra_hosts: tuple[str, ...]) -> bool:
    """Absent Origin (non-browser clients) passes; a present one must name an allowed host."""
    if origin is None:
        return True
    try:
        host = urlsplit(origin.strip()).hostname
    except ValueError:
        return False
    return bool(host) and (host in LOCAL_HOSTS or host in extra_hosts)


def caller(req: Request, channel: str) -> Caller:
    """Who called, as the receipt records it: the User-Agent with control and format characters
    escaped, so the signed receipt, its page and a terminal show what was sent, inert."""
    return Caller(channel, printable(req.header("user-agent") or "")[:200])


def purchase_call(req: Request, channel: str, arguments: object, settings: Settings) -> PurchaseCall:
    """The purchase as the flow sees it, whichever endpoint was called: the arguments, the
    Idempotency-Key header, the client's address (behind the proxies the settings trust) and
    the caller."""
    return PurchaseCall(
        arguments=arguments,
        header_key=req.header("idempotency-key"),
        client_ip=client_address(
            req.header, hops=settings.trusted_proxy_hops, front_door_id=settings.front_door_id
        ),
        caller=caller(req, channel),
    )


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


def check_json_declared(req: Request) -> None:
    """The Content-Type rule of every POST route (the purchase, MCP and A2A): a body declared as
    `application/json`, with any parameters (`; charset=utf-8`), or as a `+json` type is read;
    one declared as anything else (a form, text) is refused with UnsupportedMediaType (415)
    before it is read. No Content-Type, or an empty one, is read as JSON: scripts send none, and
    what a web page can send without one is refused by its Origin."""
    declared = (req.header("content-type") or "").split(";")[0].strip().lower()
    if declared and declared != JSON_TYPE and not declared.endswith("+json"):
        raise UnsupportedMediaType(
            f"Content-Type {declared[:60]!r} is not supported: send the body as JSON, "
            f"with Content-Type: {JSON_TYPE}"
        )


class JSONTooDeep(ValueError):
    """The document's arrays and objects nest deeper than MAX_JSON_DEPTH."""

    def __init__(self) -> None:
        super().__init__(f"arrays and objects nest more than {MAX_JSON_DEPTH} levels deep")


def parse_json(body: bytes) -> object:
    """JSON nested at most MAX_JSON_DEPTH levels whose strings are all valid Unicode: escapes such
    as \\ud800 (a lone surrogate) parse in Python but cannot be hashed, stored or sent on, so they
    are refused here (ValueError; JSONTooDeep for the nesting)."""
    try:
        parsed = json.loads(body)
    except RecursionError:
        raise JSONTooDeep() from None
    if _nesting(parsed) > MAX_JSON_DEPTH:
        raise JSONTooDeep()
    try:
        json.dumps(parsed, ensure_ascii=False).encode()
    except UnicodeError as exc:
        raise ValueError(str(exc)) from None
    return parsed


def _nesting(document: object) -> int:
    """How many levels deep arrays and objects nest (a scalar is 0), counted without recursion and
    no further than one level past MAX_JSON_DEPTH."""
    deepest, pending = 0, [(document, 1)]
    while pending and deepest <= MAX_JSON_DEPTH:
        value, depth = pending.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, depth)
            pending.extend((child, depth + 1) for child in value)
    return deepest


def parse_body(body: bytes) -> object:
    if len(body) > MAX_BODY_BYTES:
        raise PayloadTooLarge(f"request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        return parse_json(body)
    except JSONTooDeep as exc:
        raise InvalidRequest(f"request body refused: {exc}", code="invalid_json") from None
    except ValueError:
        raise InvalidRequest("request body is not valid JSON", code="invalid_json") from None


def receipt(req: Request, services: Services) -> Answer:
    """One receipt: the stored bytes for agents, a page for people. Read-only by construction."""
    receipt_id = req.route_params.get("receipt_id", "")
    if not is_receipt_id(receipt_id):
        return _not_found(req)
    try:
        body = services.storefront.stored_receipt(receipt_id)
    except StoreUnavailable:
        return error_answer(StorageDown("receipt storage is unreachable", retry_after=5))
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
    except StoreUnavailable:
        return error_answer(StorageDown("ledger storage is unreachable", retry_after=5))
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
    """Readiness: 200 `ok` when every secret is usable and Table and Blob answer with the app's
    credentials; otherwise 503 with `status` (`unconfigured` for a setting, `unavailable` for
    storage), the settings at fault by name and each problem in words, never a value."""
    readiness = assess(services.settings, services.keys, services.storage)
    return json_answer(
        200 if readiness.status == "ok" else 503,
        {
            "status": readiness.status,
            "version": __version__,
            "missing_settings": list(readiness.missing_settings),
            "problems": list(readiness.problems),
        },
        {"Cache-Control": "no-store"},
    )
