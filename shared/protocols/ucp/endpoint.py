"""UCP's REST routes as plain functions: the business profile at /.well-known/ucp, the catalog
operations under /ucp/catalog and the checkout sessions under /ucp/checkout-sessions, each
negotiated with the calling platform first. Bodies and refusals take UCP's shapes
(overview/index.md "Error Handling"; shopping/catalog/rest.md; shopping/checkout/rest.md)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.config.errors import NotConfigured, StorageOutage, StorefrontError
from shared.protocols.http import (
    Answer,
    Request,
    Usage,
    as_addressed,
    check_json_declared,
    json_answer,
    not_modified,
    parse_body,
    purchase_call,
)
from shared.protocols.ucp import catalog, checkout, orders, signatures
from shared.protocols.ucp.negotiation import Refusal
from shared.protocols.ucp.profile import CACHE_CONTROL, business_profile
from shared.protocols.ucp.wire import protocol_error

if TYPE_CHECKING:
    from shared.protocols.api import Services

PROFILE_USAGE = Usage(("GET", "HEAD"), "GET it for the store's UCP business profile")
# The catalog, checkout and order routes take every method Azure lets a trigger list and answer
# one they do not serve themselves, with a 405 in UCP's shape and the Allow of the path called.
EVERY = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
ROUTE_USAGE = Usage(EVERY, "see docs/ucp.md")
# (has an id, action) → {method: operation}
CHECKOUT_ROUTES: dict[tuple[bool, str], dict[str, str]] = {
    (False, ""): {"POST": "create"},
    (True, ""): {"GET": "get", "HEAD": "get", "PUT": "update"},
    (True, "complete"): {"POST": "complete"},
    (True, "cancel"): {"POST": "cancel"},
}
OPERATIONS: dict[str, tuple[str, Callable[[object], tuple[int, dict]]]] = {
    "search": (catalog.SEARCH, catalog.search),
    "lookup": (catalog.LOOKUP, catalog.lookup),
    "product": (catalog.LOOKUP, catalog.get_product),
}


def profile(req: Request, services: Services) -> Answer:
    """The business profile, cacheable (public, five minutes) with an ETag; 304 on a match."""
    try:
        jwks = services.keys().jwks()
    except NotConfigured:  # no signing key yet: the profile lists none
        jwks = {"keys": []}
    document = business_profile(services.settings.public_base_url, jwks)
    body = json.dumps(document, sort_keys=True)
    etag = '"' + hashlib.sha256(body.encode()).hexdigest()[:32] + '"'
    headers = {"Cache-Control": CACHE_CONTROL, "ETag": etag}
    if not_modified(req, etag, None):
        return Answer(304, b"", headers)
    return json_answer(200, document, headers)


def _negotiated(
    req: Request, services: Services, capability: str, shaped: Callable[[str, str], dict]
) -> tuple[str, bool] | Answer:
    """The platform's profile URL once negotiation with it succeeds, and whether the request
    proved it comes from that platform (its UCP signature verified); else the refusal's answer
    (`capabilities_incompatible` a 200 in the capability's envelope, made by `shaped`)."""
    continue_url = services.settings.public_base_url.rstrip("/") + "/"
    platforms = services.platforms
    try:
        url = platforms.negotiate(req.header("ucp-agent"), capability)
        if req.proven_platform is not None:  # an MCP call whose POST the platform signed
            return url, req.proven_platform == url
        if not signatures.signed(req):
            return url, False
        addressed = as_addressed(req, services.settings)  # verified with its profile's keys
        return url, signatures.verify_request(addressed, lambda fresh: platforms.keys(url, fresh=fresh))
    except Refusal as refused:
        if refused.status == 200:
            return json_answer(200, {**shaped(refused.code, refused.content), "continue_url": continue_url})
        return json_answer(refused.status, refused.body(continue_url))
    except signatures.SignatureRefusal as refused:
        return protocol_error(refused.status, refused.code, refused.content)


def checkout_request(req: Request, services: Services) -> Answer:
    """One checkout operation, chosen by the path and the method, after negotiating with the
    platform; the state-changing ones under UCP's Idempotency-Key rule."""
    checkout_id = req.route_params.get("id") or ""
    action = (req.route_params.get("action") or "").lower()
    methods = CHECKOUT_ROUTES.get((bool(checkout_id), action))
    if methods is None:
        return protocol_error(404, "not_found", "no such checkout operation; there are /complete and /cancel")
    operation = methods.get(req.method.upper())
    if operation is None:
        return _wrong_method(tuple(methods))
    sessions, replays = services.checkouts, services.replays
    if sessions is None or replays is None:
        return protocol_error(503, "not_configured", "checkout sessions are not set up on this store")
    negotiated = _negotiated(req, services, checkout.CHECKOUT, _checkout_error)
    if isinstance(negotiated, Answer):
        return negotiated
    profile_url, proven = negotiated
    platform = sessions.platform_id(profile_url)
    key = req.header("idempotency-key")

    def run() -> Answer:
        return _signed(operate(), services)

    def operate() -> Answer:
        try:
            body = None if operation in ("get", "cancel") else _read(req)
            if operation == "create":
                return sessions.create(platform, body, sessions.seed(profile_url, key))
            if operation == "get":
                return sessions.get(platform, checkout_id)
            if operation == "update":
                return sessions.update(platform, checkout_id, body)
            if operation == "cancel":
                return sessions.cancel(platform, checkout_id)
            call = purchase_call(req, "ucp", None, services.settings)
            # Order events go only to a platform that proved it asked: an unsigned request may
            # name any platform's profile, and its webhook would get orders it never made.
            webhook = _webhook_url(services, profile_url) if proven else None
            return sessions.complete(platform, checkout_id, body, call, webhook)
        except StorefrontError as exc:
            return protocol_error(exc.status, exc.code, exc.message, retry_after=exc.retry_after)
        except StorageOutage:
            return protocol_error(
                503, "storage_unavailable", "the store cannot reach its storage; nothing was changed", 5
            )

    if operation == "get":
        return run()
    scope = f"{profile_url}\x00{operation}\x00{checkout_id}"
    return replays.run(scope, key.strip() if key is not None else None, req.body, run)


def order_request(req: Request, services: Services) -> Answer:
    """GET an order (order/rest.md "Get Order"): only for the platform whose checkout it was,
    proven by its request signature ("The business MUST authenticate requests to order data")."""
    if req.method.upper() not in ("GET", "HEAD"):
        return _wrong_method(("GET", "HEAD"))
    sessions = services.checkouts
    if sessions is None:
        return protocol_error(503, "not_configured", "orders are not set up on this store")
    negotiated = _negotiated(req, services, orders.ORDER, _order_error)
    if isinstance(negotiated, Answer):
        return negotiated
    profile_url, proven = negotiated
    if not proven:
        return protocol_error(
            401,
            "signature_missing",
            "order data is given only to the platform whose checkout it was: sign the request as UCP asks",
        )
    try:
        found = sessions.order(sessions.platform_id(profile_url), req.route_params.get("id") or "")
    except StorageOutage:
        return protocol_error(503, "storage_unavailable", "the store cannot reach its storage; retry", 5)
    except StorefrontError as exc:
        return protocol_error(exc.status, exc.code, exc.message, retry_after=exc.retry_after)
    return _signed(json_answer(200, found), services)


def _wrong_method(allow: tuple[str, ...]) -> Answer:
    listed = ", ".join(allow)
    answer = protocol_error(405, "method_not_allowed", f"this path answers {listed} only")
    return Answer(answer.status, answer.body, {**answer.headers, "Allow": listed})


def _webhook_url(services: Services, profile_url: str) -> str | None:
    """Where the platform's profile asks order events to go; none when it cannot be read now."""
    try:
        return orders.webhook_url(services.platforms.profile(profile_url))
    except Refusal:
        return None


def _order_error(code: str, content: str) -> dict:
    message = checkout.error(code, content, severity="unrecoverable")
    return {"ucp": orders.envelope("error"), "messages": [message]}


def _signed(answer: Answer, services: Services) -> Answer:
    """A checkout answer that succeeded, signed by the store (signatures.md "REST Response
    Signing": recommended for complete); unsigned while the store has no signing key."""
    if answer.status >= 300:
        return answer
    try:
        keys = services.keys()
    except NotConfigured:
        return answer
    return signatures.sign_answer(answer, keys, time.time())


def _read(req: Request) -> object:
    check_json_declared(req)
    return parse_body(req.body)  # the error tree: 400 not JSON, 413 too large


def _checkout_error(code: str, content: str) -> dict:
    message = checkout.error(code, content, severity="unrecoverable")
    return {"ucp": {**checkout.envelope("error")}, "messages": [message]}


def catalog_request(req: Request, services: Services) -> Answer:
    """One catalog operation (`operation` in the route), after negotiating with the platform."""
    if req.method.upper() != "POST":
        return _wrong_method(("POST",))
    operation = req.route_params.get("operation", "")
    if operation not in OPERATIONS:
        known = ", ".join(f"/ucp/catalog/{name}" for name in OPERATIONS)
        return json_answer(
            404, {"code": "not_found", "content": f"no such catalog operation; there are {known}"}
        )
    capability, run = OPERATIONS[operation]
    negotiated = _negotiated(
        req, services, capability, lambda code, content: catalog.error(capability, code, content)
    )
    if isinstance(negotiated, Answer):
        return negotiated
    try:
        check_json_declared(req)
        body = parse_body(req.body)
    except StorefrontError as exc:
        return json_answer(exc.status, catalog.error(capability, "invalid_request", exc.message))
    except ValueError as exc:
        return json_answer(400, catalog.error(capability, "invalid_request", f"the body is not JSON: {exc}"))
    status, answer = run(body)
    return json_answer(status, answer)
