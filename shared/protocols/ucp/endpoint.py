"""UCP's REST routes as plain functions: the business profile at /.well-known/ucp, and the catalog
operations under /ucp/catalog, each negotiated with the calling platform first. Bodies and
refusals take UCP's shapes (overview/index.md "Error Handling"; shopping/catalog/rest.md)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared.config.errors import NotConfigured, StorefrontError
from shared.protocols.http import Answer, Request, Usage, check_json_declared, json_answer, parse_body
from shared.protocols.ucp import catalog
from shared.protocols.ucp.negotiation import Refusal
from shared.protocols.ucp.profile import CACHE_CONTROL, business_profile

if TYPE_CHECKING:
    from shared.protocols.api import Services

PROFILE_USAGE = Usage(("GET", "HEAD"), "GET it for the store's UCP business profile")
CATALOG_USAGE = Usage(
    ("POST",), 'POST a UCP catalog request as JSON, with UCP-Agent: profile="<your platform profile URL>"'
)
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
    if req.header("if-none-match") == etag:
        return Answer(304, b"", headers)
    return json_answer(200, document, headers)


def catalog_request(req: Request, services: Services) -> Answer:
    """One catalog operation (`operation` in the route), after negotiating with the platform."""
    public_base_url = services.settings.public_base_url
    platforms = services.platforms
    operation = req.route_params.get("operation", "")
    if operation not in OPERATIONS:
        known = ", ".join(f"/ucp/catalog/{name}" for name in OPERATIONS)
        return json_answer(
            404, {"code": "not_found", "content": f"no such catalog operation; there are {known}"}
        )
    capability, run = OPERATIONS[operation]
    continue_url = public_base_url.rstrip("/") + "/"
    try:
        platforms.negotiate(req.header("ucp-agent"), capability)
    except Refusal as refused:
        if refused.status == 200:  # capabilities_incompatible: a business outcome, in the UCP envelope
            return json_answer(
                200,
                {**catalog.error(capability, refused.code, refused.content), "continue_url": continue_url},
            )
        return json_answer(refused.status, refused.body(continue_url))
    try:
        check_json_declared(req)
        body = parse_body(req.body)
    except StorefrontError as exc:
        return json_answer(exc.status, catalog.error(capability, "invalid_request", exc.message))
    except ValueError as exc:
        return json_answer(400, catalog.error(capability, "invalid_request", f"the body is not JSON: {exc}"))
    status, answer = run(body)
    return json_answer(status, answer)
