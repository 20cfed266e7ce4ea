"""MCP revisions 2025-03-26, 2025-06-18 and 2025-11-25: the `initialize` era.

Stateless all the same: `initialize` answers the negotiated version and what the server offers,
and every later request stands alone, so any instance can answer any request. The one
`Mcp-Session-Id` minted, to a host that declares MCP Apps, holds no state (`apps`). JSON-RPC
errors answer HTTP 200, as the 2025 SDK servers do.
"""

from __future__ import annotations

from shared.config.errors import ProtocolError
from shared.protocols.http import Answer, Request, json_answer
from shared.protocols.mcp import apps
from shared.protocols.mcp.apps import Views
from shared.protocols.mcp.tools import (
    METHOD_NOT_FOUND,
    RESOURCE_METHODS,
    Toolset,
    error,
    listed_tools,
    resources,
    result,
    server_capabilities,
    tool_call,
)

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = VERSIONS[0]


def respond(message: dict, req: Request, toolset: Toolset) -> Answer:
    request_id = message["id"]
    views = _views(message, req, toolset)
    opening = views is not None and message["method"] == "initialize"
    headers = {"Mcp-Session-Id": apps.session_id()} if opening else {}
    try:
        return json_answer(200, _dispatch(message, req, toolset, views), headers)
    except ProtocolError as exc:
        return json_answer(200, error(request_id, exc.rpc_code, exc.message, exc.data), headers)


def _views(message: dict, req: Request, toolset: Toolset) -> Views | None:
    """The endpoint's MCP Apps views when this client declared the extension: in the
    `initialize` it sends, or by the session id that `initialize` answered it with."""
    if toolset.views is None:
        return None
    if message["method"] == "initialize":
        params = message.get("params")
        declared = apps.declared(params.get("capabilities") if isinstance(params, dict) else None)
    else:
        declared = apps.in_session(req.header("mcp-session-id"))
    return toolset.views if declared else None


def _dispatch(message: dict, req: Request, toolset: Toolset, views: Views | None) -> dict:
    request_id = message["id"]
    method = message["method"]
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return error(request_id, -32602, "params must be an object")
    if method == "initialize":
        return result(request_id, _initialize(params, toolset, views))
    if method == "ping":
        return result(request_id, {})
    if method == "tools/list":
        return result(request_id, {"tools": listed_tools(toolset, views)})
    if views is not None and method in RESOURCE_METHODS:
        return result(request_id, resources(request_id, method, params, views))
    if method == "tools/call":
        name, arguments = tool_call(request_id, params, toolset.names)
        return result(request_id, toolset.run(name, arguments, req, None, params, request_id))
    return error(request_id, METHOD_NOT_FOUND, f"method not found: {method}"[:200])


def _initialize(params: dict, toolset: Toolset, views: Views | None) -> dict:
    requested = params.get("protocolVersion")
    return {
        "protocolVersion": requested if requested in VERSIONS else LATEST_VERSION,
        "capabilities": server_capabilities(views),
        "serverInfo": toolset.server_info,
        "instructions": toolset.instructions,
    }
