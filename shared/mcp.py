"""The MCP endpoint: Streamable HTTP, stateless, one JSON-RPC message per POST, JSON answers.

Speaks protocol revisions 2025-03-26, 2025-06-18 and 2025-11-25. Newer clients that probe
`server/discover` first get -32601 and fall back to `initialize`. Two tools, each answering
`structuredContent` plus the same JSON as text: `purchase_free_bundle` runs the same purchase flow
as the HTTP endpoint and returns its receipt; `list_bundles` returns the catalog, the same document
as `GET /api/bundles`, from memory: no storage call, so nothing for the purchase rate limit to count.
"""

from __future__ import annotations

import json

from shared import __version__
from shared.api import (
    MAX_BODY_BYTES,
    Answer,
    JSONTooDeep,
    Request,
    json_answer,
    origin_allowed,
    parse_json,
    purchase_call,
)
from shared.catalog import LISTING_SCHEMA, listing
from shared.errors import ProtocolError
from shared.purchase import OPERATION, Storefront
from shared.receipts import OUTPUT_SCHEMA
from shared.schema import INPUT_SCHEMA
from shared.settings import Settings

SUPPORTED_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
LATEST_VERSION = SUPPORTED_VERSIONS[0]
DEFAULT_VERSION = "2025-03-26"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602

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


def handle(req: Request, store: Storefront, settings: Settings) -> Answer:
    if req.method.upper() != "POST":
        return json_answer(
            405,
            _error(
                None,
                INVALID_REQUEST,
                "this endpoint accepts POST only (no SSE stream, no sessions)",
            ),
            {"Allow": "POST"},
        )
    try:
        _check_transport(req, settings)
        message = _parse(req.body)
        if "method" not in message or "id" not in message:
            return Answer(202)  # a notification, or a response to a request of ours
        return json_answer(200, _dispatch(message, req, store))
    except ProtocolError as exc:
        return json_answer(exc.status, _error(exc.request_id, exc.rpc_code, exc.message))


def _check_transport(req: Request, settings: Settings) -> None:
    if not origin_allowed(req.header("origin"), settings.allowed_origins):
        raise ProtocolError("Origin not allowed", status=403, rpc_code=INVALID_REQUEST)
    version = req.header("mcp-protocol-version")
    if version is not None and version.strip() not in SUPPORTED_VERSIONS:
        raise ProtocolError(
            f"unsupported MCP-Protocol-Version; supported: {', '.join(SUPPORTED_VERSIONS)}",
            status=400,
            rpc_code=INVALID_REQUEST,
        )
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
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise ProtocolError("not a JSON-RPC 2.0 message", status=400, rpc_code=INVALID_REQUEST)
    request_id = message.get("id")
    if "method" not in message and ("id" not in message or ("result" in message) == ("error" in message)):
        raise ProtocolError(
            "a message without a method must be a response: an id and either result or error",
            status=400,
            rpc_code=INVALID_REQUEST,
        )
    if "method" in message:
        if not isinstance(message["method"], str):
            raise ProtocolError("method must be a string", status=400, rpc_code=INVALID_REQUEST)
        if "id" in message and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
            raise ProtocolError("id must be a string or an integer", status=400, rpc_code=INVALID_REQUEST)
    return message


def _dispatch(message: dict, req: Request, store: Storefront) -> dict:
    request_id = message["id"]
    method = message["method"]
    params = message.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return _error(request_id, INVALID_PARAMS, "params must be an object")
    if method == "initialize":
        return _result(request_id, _initialize(params))
    if method == "ping":
        return _result(request_id, {})
    if method == "tools/list":
        return _result(request_id, {"tools": list(TOOLS)})
    if method == "tools/call":
        return _call_tool(request_id, params, req, store)
    return _error(request_id, METHOD_NOT_FOUND, f"method not found: {method}"[:200])


def _initialize(params: dict) -> dict:
    requested = params.get("protocolVersion")
    return {
        "protocolVersion": requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "storefront", "title": "Storefront", "version": __version__},
        "instructions": INSTRUCTIONS,
    }


def _call_tool(request_id: object, params: dict, req: Request, store: Storefront) -> dict:
    name = params.get("name")
    arguments = params.get("arguments", {})
    if not isinstance(name, str):
        return _error(request_id, INVALID_PARAMS, "params.name must be a string")
    if name not in (OPERATION, LIST_TOOL["name"]):
        return _error(request_id, INVALID_PARAMS, f"unknown tool: {name}"[:200])
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return _error(request_id, INVALID_PARAMS, "params.arguments must be an object")
    if name == LIST_TOOL["name"]:
        return _result(request_id, _list_bundles(arguments))
    outcome = store.purchase(purchase_call(req, "mcp", arguments))
    text = outcome.body.decode()
    result = {
        "content": [{"type": "text", "text": text}],
        "structuredContent": json.loads(text),
        "isError": not outcome.ok,
    }
    if outcome.replayed:
        result["_meta"] = {"storefront/replayed": True}
    return _result(request_id, result)


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


def _result(request_id: object, result: dict) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error(request_id: object, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
