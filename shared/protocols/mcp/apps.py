"""MCP Apps (extension `io.modelcontextprotocol/ui`, spec 2026-01-26): the store's one view,
served to hosts that declare the extension and to no one else.

A host that declares it (with the `text/html;profile=mcp-app` MIME type) is told the server
offers it and its resources, sees each tool's view in `_meta.ui.resourceUri`, and can read the
view with `resources/read`. Any other client sees the server exactly as it was without it. The
2025 revisions state capabilities only in `initialize`; `legacy` remembers the declaration in the
`Mcp-Session-Id` it then mints (docs/clients.md#mcp-apps).
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from dataclasses import dataclass
from functools import cache
from pathlib import Path

EXTENSION = "io.modelcontextprotocol/ui"
MIME_TYPE = "text/html;profile=mcp-app"
VIEW_URI = "ui://storefront/store.html"
SESSION_PREFIX = "mcp-apps."
RESOURCE_NOT_FOUND = -32602  # SEP-2164: an unknown resource is invalid params, with data.uri
# No outside origin of any kind: the view loads nothing and connects nowhere; its only way out
# is the host bridge.
CSP: dict[str, list[str]] = {
    "connectDomains": [],
    "resourceDomains": [],
    "frameDomains": [],
    "baseUriDomains": [],
}
_VIEW_FILE = Path(__file__).with_name("store_view.html")
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.S)


@dataclass(frozen=True)
class Views:
    """The `ui://` resources an endpoint serves, and which tool names which."""

    resources: tuple[dict, ...]
    tool_views: dict[str, str]

    def tools(self, tools: tuple[dict, ...]) -> list[dict]:
        """The tools as a declaring host sees them: each with a view names it in `_meta.ui`."""
        return [_with_view(tool, self.tool_views.get(tool["name"])) for tool in tools]

    def listing(self) -> dict:
        return {"resources": [{k: v for k, v in r.items() if k != "text"} for r in self.resources]}

    def read(self, uri: object) -> dict | None:
        """`resources/read`'s result for `uri`, or None for a resource this endpoint lacks."""
        for resource in self.resources:
            if resource["uri"] == uri:
                content = {key: resource[key] for key in ("uri", "mimeType", "text", "_meta")}
                return {"contents": [content]}
        return None


def declared(capabilities: object) -> bool:
    """Whether a client's capabilities declare MCP Apps with the app MIME type."""
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    settings = extensions.get(EXTENSION) if isinstance(extensions, dict) else None
    mime_types = settings.get("mimeTypes") if isinstance(settings, dict) else None
    return isinstance(mime_types, list) and any(_media_type(m) == MIME_TYPE for m in mime_types)


def _media_type(value: object) -> str | None:
    """A media type as compared: case and the spaces around its `;` do not matter (RFC 9110 8.3.1)."""
    if not isinstance(value, str):
        return None
    return ";".join(part.strip() for part in value.lower().split(";"))


def session_id() -> str:
    """An `Mcp-Session-Id` that holds no state: it says only that the client declared MCP Apps
    in its `initialize`, which a 2025-revision client sends again with every request."""
    return SESSION_PREFIX + secrets.token_hex(16)


def in_session(session: str | None) -> bool:
    return session is not None and session.strip(" \t").startswith(SESSION_PREFIX)


def offered(capabilities: dict) -> dict:
    """The server's capabilities for a declaring host: its resources and the extension."""
    return {**capabilities, "resources": {"listChanged": False}, "extensions": {EXTENSION: {}}}


def store_views(tool_names: tuple[str, ...]) -> Views:
    """The store's view: browse the bundles, consent, and the receipt; both tools name it."""
    resource = {
        "uri": VIEW_URI,
        "name": "store.html",
        "title": "Free bundles",
        "description": "Browse the free bundles, agree to one being emailed, and read its receipt.",
        "mimeType": MIME_TYPE,
        "_meta": {"ui": {"csp": CSP, "prefersBorder": True}},
        "text": view_html(),
    }
    return Views((resource,), {name: VIEW_URI for name in tool_names})


@cache
def view_html() -> str:
    """The view's one document, its own Content-Security-Policy holding it to its own inline
    script and style by hash (no eval, no other script, nothing fetched)."""
    html = _VIEW_FILE.read_text(encoding="utf-8")
    hashes = {kind: _sha256(body) for kind, body in _INLINE.findall(html)}
    return html.replace("{script-hash}", hashes["script"]).replace("{style-hash}", hashes["style"])


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def _with_view(tool: dict, uri: str | None) -> dict:
    if uri is None:
        return tool
    return {**tool, "_meta": {**tool.get("_meta", {}), "ui": {"resourceUri": uri}}}
