"""UCP's MCP binding (UCP 2026-08-25: shopping/checkout/mcp.md, order/mcp.md, catalog/mcp.md) at
/ucp/mcp, in both MCP generations the store's own endpoint speaks (shared.protocols.mcp). Each tool
call is the REST operation it maps to, run by the same code on the same storage: `meta` carries
the platform (`ucp-agent.profile`) and the Idempotency-Key, `id` the resource, `checkout` or
`catalog` the body. A business outcome is the tool's result (structuredContent, and the same JSON as
text); a protocol error is a JSON-RPC error, -32001 for discovery and -32000 otherwise, its UCP code
and content in `data`. A request signature covers the MCP POST, as signatures.md "MCP Transport"
says, and is verified with the keys of the platform the call names."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import http_sf

from shared import __version__
from shared.config.errors import ProtocolError
from shared.protocols.http import Answer, Request, as_addressed
from shared.protocols.mcp.tools import Toolset, invalid_params
from shared.protocols.ucp import endpoint, signatures
from shared.protocols.ucp.negotiation import Refusal, profile_url

if TYPE_CHECKING:
    from shared.protocols.api import Services

UCP_ERROR, DISCOVERY_ERROR = -32000, -32001
DISCOVERY = ("invalid_profile_url", "profile_unreachable", "profile_malformed", "version_unsupported")
SERVER_INFO = {"name": "storefront-ucp", "title": "Storefront (UCP)", "version": __version__}
INSTRUCTIONS = (
    "The store's UCP business over MCP (UCP 2026-08-25). Every call carries meta['ucp-agent'].profile, "
    "your platform's profile URL; complete_checkout and cancel_checkout also meta['idempotency-key']. "
    "Bundles are free: totals are 0 and a checkout needs only the buyer's email."
)
_PROFILE = {"type": "object", "properties": {"profile": {"type": "string"}}, "required": ["profile"]}
_ID = {"type": "string", "description": "The checkout's (or the order's) id."}
_OBJECT = {"type": "object"}


def _meta(keyed: bool) -> dict:
    properties = {"ucp-agent": _PROFILE, "idempotency-key": {"type": "string"}}
    return {
        "type": "object",
        "properties": properties,
        "required": ["ucp-agent", *(["idempotency-key"] if keyed else [])],
    }


# name: (REST method, path template, payload member, keyed, read-only, title)
OPERATIONS: dict[str, tuple[str, str, str | None, bool, bool, str]] = {
    "create_checkout": ("POST", "checkout", "checkout", False, False, "Create a checkout session"),
    "get_checkout": ("GET", "checkout", None, False, True, "Get a checkout session"),
    "update_checkout": ("PUT", "checkout", "checkout", False, False, "Update a checkout session"),
    "complete_checkout": ("POST", "complete", "checkout", True, False, "Place the order"),
    "cancel_checkout": ("POST", "cancel", None, True, False, "Cancel a checkout session"),
    "get_order": ("GET", "order", None, False, True, "Get an order"),
    "search_catalog": ("POST", "search", "catalog", False, True, "Search the catalog"),
    "lookup_catalog": ("POST", "lookup", "catalog", False, True, "Look up products"),
    "get_product": ("POST", "product", "catalog", False, True, "Get a product"),
}
REPLACED = ("ucp-agent", "idempotency-key", "content-type", "content-digest", "signature", "signature-input")
NEEDS_ID = ("get_checkout", "update_checkout", "complete_checkout", "cancel_checkout", "get_order")


def _tool(name: str) -> dict:
    _, _, member, keyed, read_only, title = OPERATIONS[name]
    properties: dict = {"meta": _meta(keyed)}
    required = ["meta"]
    if name in NEEDS_ID:
        properties["id"], required = _ID, [*required, "id"]
    if member is not None:
        properties[member], required = _OBJECT, [*required, member]
    return {
        "name": name,
        "title": title,
        "description": f"UCP {name} (2026-08-25). {title}: see the UCP spec's MCP binding.",
        "inputSchema": {"type": "object", "properties": properties, "required": required},
        "annotations": {
            "title": title,
            "readOnlyHint": read_only,
            "destructiveHint": False,
            "openWorldHint": False,
        },
    }


TOOLS = tuple(_tool(name) for name in OPERATIONS)


def toolset(services: Services) -> Toolset:
    def run(
        name: str, arguments: dict, req: Request, capabilities: object, params: dict, request_id: object
    ) -> dict:
        return _result(_call(name, arguments, req, services, request_id), request_id)

    return Toolset(TOOLS, SERVER_INFO, INSTRUCTIONS, run)


def _call(name: str, arguments: dict, req: Request, services: Services, request_id: object) -> Answer:
    """The REST operation the tool maps to, on a request made of the call's arguments."""
    method, route, member, keyed, _, _ = OPERATIONS[name]
    meta = arguments.get("meta")
    agent = meta.get("ucp-agent") if isinstance(meta, dict) else None
    profile = agent.get("profile") if isinstance(agent, dict) else None
    key = meta.get("idempotency-key") if isinstance(meta, dict) else None
    # The profile goes into a UCP-Agent header as an RFC 8941 string: printable ASCII only.
    if not isinstance(profile, str) or not profile or not (profile.isascii() and profile.isprintable()):
        raise invalid_params(
            request_id, "arguments.meta['ucp-agent'].profile must be your platform's profile URL"
        )
    if key is not None and not isinstance(key, str):
        raise invalid_params(request_id, "arguments.meta['idempotency-key'] must be a string")
    if keyed and not key:
        raise invalid_params(request_id, f"{name} needs arguments.meta['idempotency-key']")
    identifier = arguments.get("id")
    if name in NEEDS_ID and not isinstance(identifier, str):
        raise invalid_params(request_id, "arguments.id must be a string")
    payload = arguments.get(member, {}) if member else None
    if member and not isinstance(payload, dict):
        raise invalid_params(request_id, f"arguments.{member} must be an object")
    if isinstance(payload, dict) and "id" in payload and member == "checkout":
        raise invalid_params(request_id, "arguments.checkout must not contain id: it goes in arguments.id")
    header = http_sf.ser({"profile": (profile, {})})
    proven = _proven(req, header, services)
    body = b"" if payload is None else json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    # The caller's own headers (its address, User-Agent) stay: limits and receipts are the caller's.
    headers = {k: v for k, v in req.headers.items() if k not in REPLACED}
    headers |= {"ucp-agent": header, "content-type": "application/json"}
    if key:
        headers["idempotency-key"] = key
    rest = Request(
        method, headers, body, _route(route, identifier), {}, req.url, agent=req.agent, proven_platform=proven
    )
    return _handler(route)(rest, services)


def _proven(req: Request, header: str, services: Services) -> str | None:
    """The platform the MCP request's own signature proves, if it carries one that verifies with
    the named platform's keys. Raises ProtocolError for one that does not."""
    if not signatures.signed(req):
        return None
    try:
        url = profile_url(header, local=not services.settings.hosted_on_azure)
        verified = signatures.verify_request(
            as_addressed(req, services.settings), lambda fresh: services.platforms.keys(url, fresh=fresh)
        )
    except Refusal as refused:
        raise _error(refused.status, refused.code, refused.content) from None
    except signatures.SignatureRefusal as refused:
        raise _error(refused.status, refused.code, refused.content) from None
    return url if verified else None


def _route(route: str, identifier: object) -> dict[str, str]:
    if route in ("search", "lookup", "product"):
        return {"operation": route}
    params = {"id": identifier} if isinstance(identifier, str) else {}
    return {**params, "action": route} if route in ("complete", "cancel") else params


def _handler(route: str) -> Callable[[Request, Services], Answer]:
    if route in ("search", "lookup", "product"):
        return endpoint.catalog_request
    if route == "order":
        return endpoint.order_request
    return endpoint.checkout_request


def _result(answer: Answer, request_id: object) -> dict:
    """A business outcome as the tool's result; a protocol error as a JSON-RPC error with the REST
    status (the generation's rules decide the HTTP status it goes with)."""
    try:
        document = json.loads(answer.body)
    except ValueError:
        document = {}
    if answer.status < 400:
        return {
            "content": [{"type": "text", "text": answer.body.decode()}],
            "structuredContent": document,
            "isError": False,
        }
    code = str(document.get("code", "error")) if isinstance(document, dict) else "error"
    content = str(document.get("content", "")) if isinstance(document, dict) else ""
    raise _error(answer.status, code, content, request_id, document if isinstance(document, dict) else None)


def _error(
    status: int, code: str, content: str, request_id: object = None, data: dict | None = None
) -> ProtocolError:
    rpc = DISCOVERY_ERROR if code in DISCOVERY else UCP_ERROR
    return ProtocolError(
        content or code,
        status=status,
        rpc_code=rpc,
        request_id=request_id,
        data=data or {"code": code, "content": content},
    )
