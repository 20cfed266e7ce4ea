"""The MCP endpoint (`POST /api/a2a/mcp`): Streamable HTTP, stateless, one JSON-RPC message per
POST, JSON answers, for both protocol generations on one URL.

This module is the transport: POST only, the Origin allowlist, a body declared as JSON, the size
limit and the JSON-RPC envelope. Then the `MCP-Protocol-Version` header picks the generation, as
the official SDKs do: absent or a 2025 revision goes to `legacy` (the `initialize` era),
anything else to `modern` (2026-07-28, which also answers an unknown version with the
versions it serves). Both serve the same tools from `tools` over the same purchase, so a key
used over one generation replays the same receipt over the other.
"""

from __future__ import annotations

from shared.config.errors import ProtocolError, UnsupportedMediaType
from shared.config.settings import Settings
from shared.protocols.http import (
    MAX_BODY_BYTES,
    Answer,
    JSONTooDeep,
    Request,
    check_json_declared,
    json_answer,
    origin_allowed,
    parse_json,
)
from shared.protocols.mcp import legacy, modern
from shared.protocols.mcp.apps import store_views
from shared.protocols.mcp.tools import (
    INSTRUCTIONS,
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_INFO,
    TOOLS,
    Toolset,
    error,
    run_tool,
)
from shared.purchase.call import OPERATION
from shared.purchase.storefront import Storefront


def handle(req: Request, store: Storefront, settings: Settings) -> Answer:
    """The store's own MCP endpoint: its two tools."""
    return serve(req, store_tools(store, settings), settings)


def store_tools(store: Storefront, settings: Settings) -> Toolset:
    """The store's two tools, each with its MCP Apps view; the purchase over 2026-07-28 may ask
    the client for the email."""

    def run(
        name: str, arguments: dict, req: Request, capabilities: dict | None, params: dict, request_id: object
    ) -> dict:
        if capabilities is not None and name == OPERATION:
            return modern.purchase(request_id, params, arguments, capabilities, req, store, settings)
        return run_tool(name, arguments, req, store, settings)

    return Toolset(
        TOOLS, SERVER_INFO, INSTRUCTIONS, run, store_views(tuple(str(tool["name"]) for tool in TOOLS))
    )


def serve(req: Request, toolset: Toolset, settings: Settings) -> Answer:
    """`toolset` over Streamable HTTP, in whichever generation the request speaks."""
    if req.method.upper() != "POST":
        return json_answer(
            405,
            error(None, INVALID_REQUEST, "this endpoint accepts POST only (no SSE stream)"),
            {"Allow": "POST"},
        )
    try:
        _check_transport(req, settings)
        message = _parse(req.body)
    except ProtocolError as exc:
        return json_answer(exc.status, error(exc.request_id, exc.rpc_code, exc.message))
    if "method" not in message or "id" not in message:
        return Answer(202)  # a notification, or a response to a request of ours
    if _legacy(message, req.header("mcp-protocol-version")):
        return legacy.respond(message, req, toolset)
    return modern.respond(message, req, toolset)


def _legacy(message: dict, header: str | None) -> bool:
    """No header or a 2025 one, and a body that does not declare another version in its _meta
    (a request that disagrees with itself goes where the disagreement is answered)."""
    version = None if header is None else header.strip(" \t")
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    declared = meta.get(modern.VERSION_KEY, version) if isinstance(meta, dict) else version
    return (version is None or version in legacy.VERSIONS) and declared == version


def _check_transport(req: Request, settings: Settings) -> None:
    """Origin, Content-Type (the rule of every POST route, answered -32600 as the SDK servers
    do) and size, in the order every POST route checks them."""
    if not origin_allowed(req.header("origin"), settings.allowed_origins):
        raise ProtocolError("Origin not allowed", status=403, rpc_code=INVALID_REQUEST)
    try:
        check_json_declared(req)
    except UnsupportedMediaType as exc:
        raise ProtocolError(exc.message, status=exc.status, rpc_code=INVALID_REQUEST) from None
    if len(req.body) > MAX_BODY_BYTES:
        raise ProtocolError(f"message exceeds {MAX_BODY_BYTES} bytes", status=413, rpc_code=INVALID_REQUEST)


def _parse(body: bytes) -> dict:
    try:
        message = parse_json(body)
    except JSONTooDeep as exc:
        raise ProtocolError(f"Parse error: {exc}", status=400, rpc_code=PARSE_ERROR) from None
    except ValueError:
        raise ProtocolError("Parse error: body is not JSON", status=400, rpc_code=PARSE_ERROR) from None
    if isinstance(message, list):
        raise ProtocolError(
            "batches are not supported: send one JSON-RPC message per request",
            status=400,
            rpc_code=INVALID_REQUEST,
        )
    if not isinstance(message, dict):
        raise ProtocolError("not a JSON-RPC 2.0 message", status=400, rpc_code=INVALID_REQUEST)
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        request_id = None
    if message.get("jsonrpc") != "2.0":
        raise ProtocolError(
            "not a JSON-RPC 2.0 message", status=400, rpc_code=INVALID_REQUEST, request_id=request_id
        )
    if "method" not in message and ("id" not in message or ("result" in message) == ("error" in message)):
        raise ProtocolError(
            "a message without a method must be a response: an id and either result or error",
            status=400,
            rpc_code=INVALID_REQUEST,
            request_id=request_id,
        )
    if "method" in message:
        if not isinstance(message["method"], str):
            raise ProtocolError(
                "method must be a string", status=400, rpc_code=INVALID_REQUEST, request_id=request_id
            )
        if "id" in message and request_id is None:
            raise ProtocolError("id must be a string or an integer", status=400, rpc_code=INVALID_REQUEST)
    return message
