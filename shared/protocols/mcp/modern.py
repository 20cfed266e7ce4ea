"""MCP revision 2026-07-28: no `initialize`, no sessions; every request describes itself.

A request is checked in this order, the first failure answering (docs/clients.md#mcp-protocol):

    params._meta with the version and capabilities  -32602  400  (-32022: a header version no one serves)
    MCP-Protocol-Version header equals _meta's       -32020  400
    version served                                   -32022  400  data {supported, requested}
    Mcp-Method and Mcp-Name headers equal the body   -32020  400  (nothing runs)
    clientCapabilities is an object                  -32602  400
    method known                                     -32601  404
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from collections.abc import Callable
from dataclasses import replace

from shared.config.errors import ProtocolError
from shared.config.hashing import Hasher
from shared.config.settings import Settings
from shared.protocols.http import Answer, Request, json_answer, purchase_call
from shared.protocols.mcp import apps
from shared.protocols.mcp.apps import Views
from shared.protocols.mcp.elicit import Ask, Refuse, resolve
from shared.protocols.mcp.legacy import VERSIONS as LEGACY_VERSIONS
from shared.protocols.mcp.tools import (
    METHOD_NOT_FOUND,
    RESOURCE_METHODS,
    Toolset,
    error,
    invalid_params,
    listed_tools,
    purchase_result,
    resources,
    result,
    server_capabilities,
    tool_call,
)
from shared.purchase.storefront import Storefront

VERSION = "2026-07-28"
VERSIONS = (VERSION,)
SUPPORTED_VERSIONS = (*VERSIONS, *LEGACY_VERSIONS)
HEADER_MISMATCH, UNSUPPORTED_PROTOCOL_VERSION = -32020, -32022
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
# The tool list changes only with a deployment (a new bundle widens bundle_id's enum).
LIST_TTL_MS = 300_000
_SENTINEL = re.compile(r"=\?base64\?(?P<payload>[A-Za-z0-9+/=]*)\?=")
_HEADER_SAFE = re.compile(r"[\x20-\x7e\t]*")


def respond(message: dict, req: Request, toolset: Toolset) -> Answer:
    request_id = message["id"]
    try:
        capabilities = _check(message, req)
        return json_answer(200, result(request_id, _dispatch(message, capabilities, req, toolset)))
    except ProtocolError as exc:
        return json_answer(exc.status, error(request_id, exc.rpc_code, exc.message, exc.data))


def _check(message: dict, req: Request) -> dict:
    """The ladder above up to the method; returns the client's capabilities for this request."""
    request_id, method = message["id"], message["method"]
    given = message.get("params")
    params: dict = given if isinstance(given, dict) else {}
    header_version = _header(req, "mcp-protocol-version")
    meta = params.get("_meta")
    if not isinstance(meta, dict) or VERSION_KEY not in meta or CAPABILITIES_KEY not in meta:
        if header_version is not None and header_version not in SUPPORTED_VERSIONS:
            raise _unsupported(request_id, header_version)
        raise invalid_params(
            request_id, f"params._meta must be an object with {VERSION_KEY} and {CAPABILITIES_KEY}"
        )
    if header_version is None or header_version != meta[VERSION_KEY]:
        raise _mismatch(request_id, f"MCP-Protocol-Version header does not match params._meta {VERSION_KEY}")
    if meta[VERSION_KEY] not in VERSIONS:
        raise _unsupported(request_id, meta[VERSION_KEY])
    if _header(req, "mcp-method") != method:
        raise _mismatch(request_id, "Mcp-Method header does not match the request's method")
    named = method == "tools/call" and params.get("name") is not None
    if named and _decoded(_header(req, "mcp-name")) != params["name"]:
        raise _mismatch(request_id, "Mcp-Name header does not match params.name")
    if not isinstance(meta[CAPABILITIES_KEY], dict):
        raise invalid_params(request_id, f"params._meta {CAPABILITIES_KEY} must be an object")
    return meta[CAPABILITIES_KEY]


def _header(req: Request, name: str) -> str | None:
    """A header's value without the whitespace around it, which is not part of it (RFC 9110 5.5)."""
    value = req.header(name)
    return None if value is None else value.strip(" \t")


def _decoded(value: str | None) -> str | None:
    """A header value as sent, or the text of its `=?base64?...?=` form; None when malformed."""
    if value is None or not _HEADER_SAFE.fullmatch(value):
        return None
    match = _SENTINEL.fullmatch(value)
    if match is None:
        return value
    try:
        raw = base64.b64decode(match["payload"], validate=True)
        return raw.decode() if base64.b64encode(raw).decode() == match["payload"] else None
    except (binascii.Error, UnicodeDecodeError):
        return None


def _mismatch(request_id: object, message: str) -> ProtocolError:
    return ProtocolError(message, status=400, rpc_code=HEADER_MISMATCH, request_id=request_id)


def _unsupported(request_id: object, requested: object) -> ProtocolError:
    return ProtocolError(
        f"Unsupported protocol version; supported: {', '.join(SUPPORTED_VERSIONS)}",
        status=400,
        rpc_code=UNSUPPORTED_PROTOCOL_VERSION,
        request_id=request_id,
        data={"supported": list(SUPPORTED_VERSIONS), "requested": requested},
    )


def _dispatch(message: dict, capabilities: dict, req: Request, toolset: Toolset) -> dict:
    request_id, method, params = message["id"], message["method"], message["params"]
    views = toolset.views if apps.declared(capabilities) else None
    handlers: dict[str, Callable[[], dict]] = {
        "server/discover": lambda: _discover(toolset, views),
        "tools/list": lambda: _list_tools(request_id, params, toolset, views),
        "tools/call": lambda: _call_tool(request_id, params, capabilities, req, toolset),
    }
    if views is not None and method in RESOURCE_METHODS:
        declared: Views = views
        handlers[method] = lambda: _cacheable(resources(request_id, method, params, declared), views)
    handler = handlers.get(method)
    if handler is None:
        raise ProtocolError(
            f"method not found in MCP {VERSION}: {method}"[:200],
            status=404,
            rpc_code=METHOD_NOT_FOUND,
            request_id=request_id,
        )
    body = handler()
    body.setdefault("resultType", "complete")
    body["_meta"] = {**body.get("_meta", {}), SERVER_INFO_KEY: toolset.server_info}
    return body


def _discover(toolset: Toolset, views: Views | None) -> dict:
    return _cacheable(
        {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": server_capabilities(views),
            "instructions": toolset.instructions,
        },
        views,
    )


def _cacheable(body: dict, views: Views | None) -> dict:
    """Caching hints: public for what every client gets alike; private for what only a host
    declaring MCP Apps is told, so no shared cache hands it to a client that did not declare it."""
    return {**body, "ttlMs": LIST_TTL_MS, "cacheScope": "private" if views else "public"}


def _list_tools(request_id: object, params: dict, toolset: Toolset, views: Views | None) -> dict:
    if params.get("cursor") is not None:
        raise invalid_params(request_id, "invalid cursor: the tool list has a single page")
    return _cacheable({"tools": listed_tools(toolset, views)}, views)


def _call_tool(request_id: object, params: dict, capabilities: dict, req: Request, toolset: Toolset) -> dict:
    name, arguments = tool_call(request_id, params, toolset.names)
    return toolset.run(name, arguments, req, capabilities, params, request_id)


def purchase(
    request_id: object,
    params: dict,
    arguments: dict,
    capabilities: dict,
    req: Request,
    store: Storefront,
    settings: Settings,
) -> dict:
    """The purchase tool over 2026-07-28: a missing email is asked for with the client's form
    (`elicit`) when it can show one; the answer, or the refusal, runs as the purchase."""
    call = purchase_call(req, "mcp", arguments, settings)
    resolved = resolve(
        request_id,
        params,
        arguments,
        capabilities,
        call.header_key,
        Hasher(settings.hash_secret),
        time.time(),
        settings.idempotency_ttl_seconds,
    )
    if isinstance(resolved, Ask):
        return resolved.result
    if isinstance(resolved, Refuse):
        return purchase_result(store.refuse(call, resolved.error))
    return purchase_result(store.purchase(replace(call, arguments=resolved)))  # the email, as answered
