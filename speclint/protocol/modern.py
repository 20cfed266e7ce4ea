"""MCP 2026-07-28, the stateless revision: no ``initialize`` and no session. Every request
carries the protocol version and the client's capabilities (both required) and its name in
``params._meta``; over Streamable HTTP it also sends ``MCP-Protocol-Version``, ``Mcp-Method`` and,
for an operation on a named thing, ``Mcp-Name``, which servers check against the body.
``server/discover`` answers the versions, capabilities and name of the server."""

from __future__ import annotations

import base64

from speclint.load import CACHE_SCOPES, server_stamp
from speclint.protocol.wire import CLIENT_INFO, Refused, Wire

VERSION = "2026-07-28"
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
UNSUPPORTED_PROTOCOL_VERSION = -32022
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # the Mcp-Name source
_SENTINEL = ("=?base64?", "?=")


def envelope(params: dict) -> dict:
    """`params` with the request metadata 2026-07-28 requires; speclint declares no capability."""
    given = params.get("_meta")
    meta = given if isinstance(given, dict) else {}
    stamp = {PROTOCOL_VERSION_KEY: VERSION, CLIENT_CAPABILITIES_KEY: {}, CLIENT_INFO_KEY: CLIENT_INFO}
    return {**params, "_meta": {**meta, **stamp}}


def headers(method: str, params: dict) -> dict[str, str]:
    """The Streamable HTTP headers mirroring the body, so intermediaries can route on them."""
    mirrored = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    key = NAMED.get(method)
    name = params.get(key) if key else None
    if isinstance(name, str):
        mirrored["Mcp-Name"] = header_value(name)
    return mirrored


def header_value(text: str) -> str:
    """`text` as a header value: as it is when it is visible ASCII, spaces and tabs with no space
    at either end, else in the spec's ``=?base64?...?=`` form (also when it looks like one)."""
    plain = (
        all(c == "\t" or " " <= c <= "~" for c in text)
        and text == text.strip(" \t")
        and not (text.startswith(_SENTINEL[0]) and text.endswith(_SENTINEL[1]))
    )
    if plain:
        return text
    encoded = base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
    return f"{_SENTINEL[0]}{encoded}{_SENTINEL[1]}"


def discover(wire: Wire, wait: float) -> dict:
    params = envelope({})
    return wire.request("server/discover", params, headers("server/discover", params), wait=wait)


def supported_versions(result: dict) -> list[str] | None:
    """The versions a DiscoverResult names, or None when `result` is not one: then it is no
    evidence that the server speaks this revision."""
    versions = result.get("supportedVersions")
    ttl = result.get("ttlMs", 0)
    if (
        not isinstance(versions, list)
        or not all(isinstance(v, str) for v in versions)
        or not isinstance(result.get("capabilities"), dict)
        or not isinstance(ttl, (int, float))
        or isinstance(ttl, bool)
        or result.get("cacheScope", "private") not in CACHE_SCOPES
    ):
        return None
    return versions


def versions_refused(error: Exception) -> list[str] | None:
    """The versions an UnsupportedProtocolVersionError says the server supports, or None when
    `error` is not one (or its data does not say)."""
    if not isinstance(error, Refused) or error.code != UNSUPPORTED_PROTOCOL_VERSION:
        return None
    data = error.data if isinstance(error.data, dict) else {}
    supported = data.get("supported")
    if not isinstance(data.get("requested"), str) or not isinstance(supported, list):
        return None
    return supported if all(isinstance(v, str) for v in supported) else None


class Modern:
    """A server that answered ``server/discover`` with this revision among its versions."""

    protocol_version = VERSION

    def __init__(self, wire: Wire, discovered: dict):
        self.wire = wire
        self.name, self.version = server_stamp(discovered)

    def request(self, method: str, params: dict) -> dict:
        params = envelope(params)
        return self.wire.request(method, params, headers(method, params))
