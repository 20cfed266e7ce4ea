"""An HTTP proxy on loopback that makes any MCP client a host declaring MCP Apps: it adds the
extension, with its MIME type, to the capabilities of every request that states them (`initialize`,
and the 2026-07-28 `_meta`), and passes everything else through as it came, Host and Origin
included. The official conformance suite, whose client declares no extension, runs through it to
check the resources the store offers only such hosts."""

from __future__ import annotations

import contextlib
import json

import requests

from shared.protocols.mcp import apps
from shared.protocols.mcp.modern import CAPABILITIES_KEY
from tests.loopback_http import Handler, LoopbackServer

DECLARATION = {apps.EXTENSION: {"mimeTypes": [apps.MIME_TYPE]}}
PASSED_BACK = ("content-type", "mcp-session-id", "allow", "retry-after")
HOP_BY_HOP = ("connection", "content-length", "transfer-encoding", "keep-alive")


def declaring(message: object) -> object:
    """The message with MCP Apps declared wherever it states the client's capabilities."""
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict):
        return message
    if message.get("method") == "initialize" and isinstance(params.get("capabilities"), dict):
        _declare(params["capabilities"])
    meta = params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(CAPABILITIES_KEY), dict):
        _declare(meta[CAPABILITIES_KEY])
    return message


def _declare(capabilities: dict) -> None:
    extensions = capabilities.setdefault("extensions", {})
    if isinstance(extensions, dict):
        extensions.update(DECLARATION)


class DeclaringHost:
    """`url` answers as `upstream` does, to a client that declared MCP Apps."""

    def __init__(self, upstream: str) -> None:
        self._loopback = LoopbackServer(type("Proxy", (_Proxy,), {"upstream": upstream}))
        self.url = self._loopback.origin

    def close(self) -> None:
        self._loopback.close()


class _Proxy(Handler):
    upstream = ""
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with contextlib.suppress(ValueError):  # not JSON: the store answers it as it would
            body = json.dumps(declaring(json.loads(body))).encode()
        self._forward(body)

    def do_GET(self) -> None:  # noqa: N802
        self._forward(None)

    def do_DELETE(self) -> None:  # noqa: N802
        self._forward(None)

    def _forward(self, body: bytes | None) -> None:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        answer = requests.request(
            self.command, self.upstream + self.path, data=body, headers=headers, timeout=60
        )
        kept = {name: value for name, value in answer.headers.items() if name.lower() in PASSED_BACK}
        self.answer(answer.status_code, answer.content, kept)
