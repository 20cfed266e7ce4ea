"""MCP revisions 2025-03-26, 2025-06-18 and 2025-11-25: the `initialize` era.

Stateless and sessionless all the same: `initialize` answers the negotiated version and what the
server offers, and every later request stands alone (no `Mcp-Session-Id` is minted), so any
instance can answer any request. JSON-RPC errors answer HTTP 200, as the 2025 SDK servers do.
"""

from __future__ import annotations

from shared.config.errors import ProtocolError
from shared.protocols.http import Answer, Request, json_answer
from shared.protocols.mcp.tools import CAPABILITIES, METHOD_NOT_FOUND, Toolset, error, result, tool_call

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = VERSIONS[0]


def respond(message: dict, req: Request, toolset: Toolset) -> Answer:
    request_id = message["id"]
    try:
        return json_answer(200, _dispatch(message, req, toolset))
    except ProtocolError as exc:
        return json_answer(200, error(request_id, exc.rpc_code, exc.message, exc.data))


def _dispatch(message: dict, req: Request, toolset: Toolset) -> dict:
    request_id = message["id"]
    method = message["method"]
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return error(request_id, -32602, "params must be an object")
    if method == "initialize":
        return result(request_id, _initialize(params, toolset))
    if method == "ping":
        return result(request_id, {})
    if method == "tools/list":
        return result(request_id, {"tools": list(toolset.tools)})
    if method == "tools/call":
        name, arguments = tool_call(request_id, params, toolset.names)
        return result(request_id, toolset.run(name, arguments, req, None, params, request_id))
    return error(request_id, METHOD_NOT_FOUND, f"method not found: {method}"[:200])


def _initialize(params: dict, toolset: Toolset) -> dict:
    requested = params.get("protocolVersion")
    return {
        "protocolVersion": requested if requested in VERSIONS else LATEST_VERSION,
        "capabilities": CAPABILITIES,
        "serverInfo": toolset.server_info,
        "instructions": toolset.instructions,
    }
