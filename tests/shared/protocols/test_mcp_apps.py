"""MCP Apps over real HTTP (raw JSON-RPC against the session's dev host), in both generations: the
extension, the tools' views and the `ui://` resources go only to a host that declares it, and
every other client sees exactly what it saw before."""

from __future__ import annotations

import base64
import hashlib
import re

import pytest

from shared.protocols.mcp import apps
from tests.shared.protocols.test_mcp_modern import modern
from tests.support import Buyer

DECLARED = {"extensions": {apps.EXTENSION: {"mimeTypes": [apps.MIME_TYPE]}}}
DECLARED_OTHERWISE = [  # the same media type, written as RFC 9110 allows
    {"extensions": {apps.EXTENSION: {"mimeTypes": ["text/html; profile=mcp-app"]}}},
    {"extensions": {apps.EXTENSION: {"mimeTypes": ["image/png", "Text/HTML ;profile=mcp-app"]}}},
]
NOT_DECLARED = [
    {},
    {"extensions": {}},
    {"extensions": {apps.EXTENSION: {}}},  # no MIME type: it cannot render the view
    {"extensions": {apps.EXTENSION: {"mimeTypes": ["text/html"]}}},
    {"extensions": {apps.EXTENSION: {"mimeTypes": apps.MIME_TYPE}}},  # a string, not a list
    {"extensions": {"io.example/other": {"mimeTypes": [apps.MIME_TYPE]}}},
    {"extensions": [apps.EXTENSION]},
]
TODAY = {"tools": {"listChanged": False}}


def initialize(buyer: Buyer, capabilities: dict):
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities,
        "clientInfo": {"name": "t", "version": "1"},
    }
    return buyer.mcp("initialize", params)


def session_of(buyer: Buyer) -> dict:
    response = initialize(buyer, DECLARED)
    return {"Mcp-Session-Id": response.headers["Mcp-Session-Id"]}


def tool_metas(tools: list[dict]) -> dict:
    return {tool["name"]: tool.get("_meta") for tool in tools}


# --- the 2025 revisions ----------------------------------------------------------------------


@pytest.mark.parametrize("capabilities", NOT_DECLARED)
def test_a_client_without_the_extension_sees_the_server_as_before(buyer, capabilities):
    response = initialize(buyer, capabilities)
    assert response.json()["result"]["capabilities"] == TODAY
    assert "Mcp-Session-Id" not in response.headers

    tools = buyer.mcp("tools/list").json()["result"]["tools"]
    assert tool_metas(tools) == {"purchase_free_bundle": None, "list_bundles": None}
    for method in apps_methods():
        assert buyer.mcp(method, {"uri": apps.VIEW_URI}).json()["error"]["code"] == -32601


@pytest.mark.parametrize("capabilities", DECLARED_OTHERWISE)
def test_the_media_type_may_be_written_with_spaces_and_in_any_case(buyer, capabilities):
    assert "extensions" in initialize(buyer, capabilities).json()["result"]["capabilities"]
    found = modern(buyer, "server/discover", capabilities=capabilities).json()["result"]["capabilities"]
    assert "extensions" in found


def test_a_declaring_host_is_offered_the_extension_and_its_resources(buyer):
    response = initialize(buyer, DECLARED)
    capabilities = response.json()["result"]["capabilities"]

    assert capabilities == {**TODAY, "resources": {"listChanged": False}, "extensions": {apps.EXTENSION: {}}}
    assert re.fullmatch(r"mcp-apps\.[0-9a-f]{32}", response.headers["Mcp-Session-Id"])
    assert initialize(buyer, DECLARED).headers["Mcp-Session-Id"] != response.headers["Mcp-Session-Id"]


def test_in_its_session_a_declaring_host_sees_each_tools_view_and_reads_it(buyer):
    session = session_of(buyer)

    tools = buyer.mcp("tools/list", headers=session).json()["result"]["tools"]
    assert tool_metas(tools) == {
        name: {"ui": {"resourceUri": apps.VIEW_URI}} for name in ("purchase_free_bundle", "list_bundles")
    }
    listed = buyer.mcp("resources/list", headers=session).json()["result"]["resources"]
    assert [(r["uri"], r["mimeType"]) for r in listed] == [(apps.VIEW_URI, apps.MIME_TYPE)]
    assert "text" not in listed[0]
    assert listed[0]["_meta"]["ui"]["csp"] == apps.CSP

    templates = buyer.mcp("resources/templates/list", headers=session).json()["result"]
    assert templates == {"resourceTemplates": []}
    contents = buyer.mcp("resources/read", {"uri": apps.VIEW_URI}, session).json()["result"]["contents"]
    assert [(c["uri"], c["mimeType"]) for c in contents] == [(apps.VIEW_URI, apps.MIME_TYPE)]
    assert contents[0]["text"] == apps.view_html()
    assert contents[0]["_meta"] == {"ui": {"csp": apps.CSP, "prefersBorder": True}}


@pytest.mark.parametrize("uri", ["ui://storefront/other.html", "ui://storefront/store.html/", "test://x", ""])
def test_reading_a_resource_the_store_lacks_is_invalid_params_naming_it(buyer, uri):
    error = buyer.mcp("resources/read", {"uri": uri}, session_of(buyer)).json()["error"]
    assert error["code"] == -32602
    assert error["data"] == {"uri": uri}


@pytest.mark.parametrize("params", [{}, {"uri": 7}, {"uri": None}, {"uri": ["ui://storefront/store.html"]}])
def test_a_read_without_a_string_uri_is_invalid_params(buyer, params):
    error = buyer.mcp("resources/read", params, session_of(buyer)).json()["error"]
    assert error["code"] == -32602
    assert "uri" in error["message"]


def test_any_other_session_id_gets_nothing_of_them(buyer):
    """The id is a flag, not a secret: a client could as well declare the extension itself."""
    tools = buyer.mcp("tools/list", headers={"Mcp-Session-Id": "some-other-session"}).json()["result"][
        "tools"
    ]
    assert tool_metas(tools) == {"purchase_free_bundle": None, "list_bundles": None}


def test_tool_results_are_the_same_with_the_extension_or_without(buyer, mail):
    session = session_of(buyer)
    listed = [
        buyer.mcp("tools/call", {"name": "list_bundles", "arguments": {}}, h).json() for h in (session, {})
    ]
    assert listed[0] == listed[1]

    arguments = {"email": buyer.email, "idempotency_key": buyer.key}
    first = buyer.mcp("tools/call", {"name": "purchase_free_bundle", "arguments": arguments}, session).json()
    again = buyer.mcp("tools/call", {"name": "purchase_free_bundle", "arguments": arguments}).json()
    assert first["result"]["structuredContent"] == again["result"]["structuredContent"]
    assert set(first["result"]) == {"content", "structuredContent", "isError"}
    assert len(mail.emails_to(buyer.email)) == 1


# --- 2026-07-28 ------------------------------------------------------------------------------


@pytest.mark.parametrize("capabilities", NOT_DECLARED)
def test_over_2026_a_client_without_the_extension_sees_the_server_as_before(buyer, capabilities):
    discovered = modern(buyer, "server/discover", capabilities=capabilities).json()["result"]
    assert discovered["capabilities"] == TODAY
    assert discovered["cacheScope"] == "public"
    tools = modern(buyer, "tools/list", capabilities=capabilities).json()["result"]["tools"]
    assert tool_metas(tools) == {"purchase_free_bundle": None, "list_bundles": None}
    for method in apps_methods():
        response = modern(buyer, method, {"uri": apps.VIEW_URI}, capabilities=capabilities)
        assert (response.status_code, response.json()["error"]["code"]) == (404, -32601)


def test_over_2026_a_declaring_host_sees_views_and_reads_them_with_caching_hints(buyer):
    discovered = modern(buyer, "server/discover", capabilities=DECLARED).json()["result"]
    assert discovered["capabilities"]["extensions"] == {apps.EXTENSION: {}}
    assert discovered["capabilities"]["resources"] == {"listChanged": False}
    assert discovered["cacheScope"] == "private"  # no shared cache may give it to a plain client

    listed = modern(buyer, "tools/list", capabilities=DECLARED).json()["result"]
    assert listed["cacheScope"] == "private"
    tools = listed["tools"]
    assert {name: meta["ui"]["resourceUri"] for name, meta in tool_metas(tools).items()} == {
        "purchase_free_bundle": apps.VIEW_URI,
        "list_bundles": apps.VIEW_URI,
    }
    for method in apps_methods():
        result = modern(buyer, method, {"uri": apps.VIEW_URI}, capabilities=DECLARED).json()["result"]
        assert result["resultType"] == "complete"
        assert result["ttlMs"] >= 0 and result["cacheScope"] == "private"
    read = modern(buyer, "resources/read", {"uri": apps.VIEW_URI}, capabilities=DECLARED).json()["result"]
    assert read["contents"][0]["text"] == apps.view_html()

    missing = modern(buyer, "resources/read", {"uri": "ui://nope"}, capabilities=DECLARED)
    assert missing.status_code == 400
    assert missing.json()["error"]["code"] == -32602


def test_the_ucp_binding_has_no_views_whatever_the_host_declares(buyer):
    response = buyer.http.post(
        f"{buyer.host}/ucp/mcp",
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": DECLARED},
        },
        timeout=30,
    )
    assert "extensions" not in response.json()["result"]["capabilities"]
    assert "Mcp-Session-Id" not in response.headers


# --- the view's own document -----------------------------------------------------------------


def test_the_view_holds_itself_to_its_own_script_and_style_by_hash():
    html = apps.view_html()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)[1]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    for kind in ("script", "style"):
        (body,) = re.findall(rf"<{kind}>(.*?)</{kind}>", html, re.S)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert directives[f"{kind}-src"] == f"'sha256-{digest}'"
    assert directives["default-src"] == directives["connect-src"] == "'none'"
    assert directives["base-uri"] == directives["form-action"] == "'none'"


def test_the_view_loads_nothing_evaluates_nothing_and_writes_no_markup():
    html = apps.view_html()
    assert not re.search(r'\s(src|href|action|srcset)="', html)  # no markup names a URL
    assert not re.search(r"https?://", html)
    for unsafe in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
        'setTimeout("',
    ):
        assert unsafe not in html
    called = set(re.findall(r'name: "([a-z_]+)"', html))
    assert called == {"purchase_free_bundle", "list_bundles"}  # only the store's own tools


def apps_methods() -> tuple[str, ...]:
    return ("resources/list", "resources/templates/list", "resources/read")
