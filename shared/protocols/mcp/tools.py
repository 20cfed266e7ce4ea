"""What the MCP endpoint offers, whichever protocol generation a client speaks: the two tools, the
server's identity and instructions, running a tool call, and the JSON-RPC envelopes.

`purchase_free_bundle` runs the same purchase flow as the HTTP endpoint and returns its receipt as
`structuredContent` plus the same JSON as text; `list_bundles` returns the catalog, the same
document as `GET /api/bundles`, from memory: no storage call, so nothing for the purchase rate
limit to count. The adapters (`legacy`, `modern`) add only what their revision's wire
format asks for around these results.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from shared import __version__
from shared.config.errors import ProtocolError
from shared.config.settings import Settings
from shared.protocols.http import Request, nearest, purchase_call, shown
from shared.protocols.mcp.apps import RESOURCE_NOT_FOUND, Views, offered
from shared.purchase.call import OPERATION
from shared.purchase.catalog import LISTING_SCHEMA, listing
from shared.purchase.receipt.document import OUTPUT_SCHEMA
from shared.purchase.schema import INPUT_SCHEMA
from shared.purchase.storefront import Storefront

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_INFO = {"name": "storefront", "title": "Storefront", "version": __version__}
CAPABILITIES = {"tools": {"listChanged": False}}

INSTRUCTIONS = (
    "Storefront gives away free digital bundles. Call list_bundles to see them (free to call, it "
    "changes nothing). Call purchase_free_bundle with the buyer's email and a bundle_id "
    "to send them a download link; the result is an audit-trail receipt. Always pass an "
    "idempotency_key and reuse it when you retry, so a retry returns the original receipt instead "
    "of sending a second email."
)

TOOL = {
    "name": OPERATION,
    "title": "Get a free bundle",
    "description": (
        "Sends a free digital bundle to an email address. Side effects: creates the buyer as a "
        "contact in the store's mailing system (an existing contact is left unchanged) and sends "
        "one email with a download link. Returns an audit-trail receipt with six runtime checks. "
        "Pass an idempotency_key (recommended for production agents) and reuse it on retries: "
        "a retry then returns the original receipt and sends nothing again."
    ),
    "inputSchema": INPUT_SCHEMA,
    "outputSchema": OUTPUT_SCHEMA,
    "annotations": {
        "title": "Get a free bundle",
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": True,
    },
}
LIST_TOOL = {
    "name": "list_bundles",
    "title": "List the free bundles",
    "description": (
        "Lists the bundles this store gives away: for each, its id (the bundle_id to pass to "
        "purchase_free_bundle), title, description, price (0.00) and currency. Takes no arguments. "
        "Read-only: it changes nothing and does not send email."
    ),
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
    "outputSchema": LISTING_SCHEMA,
    "annotations": {
        "title": "List the free bundles",
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": False,
    },
}
TOOLS = (TOOL, LIST_TOOL)


@dataclass(frozen=True)
class Toolset:
    """What one MCP endpoint serves in both generations: its tools, its identity and
    instructions, how a call runs (`run(name, arguments, req, capabilities, params)`, the
    last two the 2026-07-28 request's; raises ProtocolError), and its MCP Apps views, if any.
    The store's is `store_tools`."""

    tools: tuple[dict, ...]
    server_info: dict
    instructions: str
    run: Callable[..., dict]
    views: Views | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(tool["name"] for tool in self.tools)


RESOURCE_METHODS = ("resources/list", "resources/templates/list", "resources/read")


def listed_tools(toolset: Toolset, views: Views | None) -> list[dict]:
    """The tools a client sees: with their views only for a host that declared MCP Apps."""
    return views.tools(toolset.tools) if views else list(toolset.tools)


def server_capabilities(views: Views | None) -> dict:
    return offered(CAPABILITIES) if views else CAPABILITIES


def resources(request_id: object, method: str, params: dict, views: Views) -> dict:
    """`resources/list` (one page), `resources/templates/list` (none) or `resources/read` of an
    endpoint's views."""
    if method != "resources/read":
        if params.get("cursor") is not None:
            raise invalid_params(request_id, "invalid cursor: the list has a single page")
        return views.listing() if method == "resources/list" else {"resourceTemplates": []}
    uri = params.get("uri")
    found = views.read(uri)
    if found is None:
        raise ProtocolError(
            "resource not found" if isinstance(uri, str) else "params.uri must be a string",
            status=400,
            rpc_code=RESOURCE_NOT_FOUND,
            request_id=request_id,
            data={"uri": uri} if isinstance(uri, str) else None,
        )
    return found


def tool_call(request_id: object, params: dict, names: tuple[str, ...]) -> tuple[str, dict]:
    """The tool's name and arguments from `tools/call` params; -32602 when either is malformed or
    the tool is not one of `names`."""
    name = params.get("name")
    arguments = params.get("arguments", {})
    if not isinstance(name, str):
        raise invalid_params(request_id, "params.name must be a string")
    if name not in names:
        raise invalid_params(request_id, unknown_tool(name, names))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise invalid_params(request_id, "params.arguments must be an object")
    return name, arguments


def unknown_tool(name: str, names: tuple[str, ...]) -> str:
    """-32602's message for a tool this endpoint lacks: the nearest tool's name, else all of them
    (a handful, so the answer stays short); the caller's name quoted in part and escaped."""
    near = nearest(name, names)
    hint = f"did you mean {near}?" if near else f"the tools are {', '.join(names)}"
    return f"unknown tool: {shown(name)}; {hint}"


def run_tool(name: str, arguments: dict, req: Request, store: Storefront, settings: Settings) -> dict:
    """The tool's result (CallToolResult without any revision's envelope fields)."""
    if name == LIST_TOOL["name"]:
        return _list_bundles(arguments)
    return purchase_result(store.purchase(purchase_call(req, "mcp", arguments, settings)))


def purchase_result(outcome) -> dict:
    """A purchase outcome (a receipt, fulfilled or refused) as a tool result."""
    text = outcome.body.decode()
    result = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": json.loads(text),
        "isError": not outcome.ok,
    }
    if outcome.replayed:
        result["_meta"] = {"storefront/replayed": True}
    return result


def _list_bundles(arguments: dict) -> dict:
    """The catalog as a tool result; arguments, which the tool takes none of, are an error result
    without structuredContent (clients validate any structuredContent against the outputSchema)."""
    if arguments:
        error = {
            "code": "invalid_request",
            "message": f"list_bundles takes no arguments; got: {', '.join(sorted(arguments))}"[:200],
        }
        return {"content": [{"type": "text", "text": json.dumps({"error": error})}], "isError": True}
    document = listing()
    return {
        "content": [{"type": "text", "text": json.dumps(document)}],
        "structuredContent": document,
        "isError": False,
    }


def invalid_params(request_id: object, message: str) -> ProtocolError:
    return ProtocolError(message, status=400, rpc_code=INVALID_PARAMS, request_id=request_id)


def result(request_id: object, body: dict) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": body}


def error(request_id: object, code: int, message: str, data: object = None) -> dict:
    payload: dict = {"code": code, "message": message}
    if data is not None:
        payload["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": payload}
