"""The MCP endpoint's protocol behaviour over real HTTP (raw JSON-RPC), and one call straight into
`mcp.handle` with a store that must not be touched."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import jsonschema
import pytest

from shared.protocols.http import Request
from shared.protocols.mcp import endpoint as mcp
from shared.protocols.mcp.legacy import VERSIONS as LEGACY_VERSIONS
from shared.purchase.catalog import listing
from tests.support import HOSTILE_TOOL_NAMES, ROOT, assert_unknown_tool_quoted_safely


def rpc(response) -> dict:
    assert response.headers["Content-Type"].startswith("application/json")
    return response.json()


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_initialize_echoes_a_supported_version(buyer, version):
    body = rpc(buyer.mcp("initialize", {"protocolVersion": version, "capabilities": {}}))

    result = body["result"]
    assert result["protocolVersion"] == version
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["serverInfo"]["name"] == "storefront"
    assert result["serverInfo"]["title"] and result["serverInfo"]["version"]
    assert "idempotency_key" in result["instructions"]


def test_initialize_with_unknown_version_answers_the_newest(buyer):
    body = rpc(buyer.mcp("initialize", {"protocolVersion": "2024-01-01", "capabilities": {}}))
    assert body["result"]["protocolVersion"] == "2025-11-25"


def test_notifications_get_202_with_empty_body(buyer):
    response = buyer.http.post(
        f"{buyer.host}/api/a2a/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        timeout=10,
    )
    assert response.status_code == 202
    assert response.content == b""


def test_ping_returns_empty_object(buyer):
    assert rpc(buyer.mcp("ping", rpc_id="abc")) == {"jsonrpc": "2.0", "id": "abc", "result": {}}


@pytest.mark.parametrize("method", ["server/discover", "resources/list", "prompts/get", "nope"])
def test_unknown_methods_are_method_not_found(buyer, method):
    body = rpc(buyer.mcp(method))
    assert body["error"]["code"] == -32601
    assert body["id"] == 1


def test_tools_list_offers_the_purchase_tool_first_then_list_bundles(buyer):
    tools = rpc(buyer.mcp("tools/list"))["result"]["tools"]

    assert [t["name"] for t in tools] == ["purchase_free_bundle", "list_bundles"]


def test_tools_list_describes_the_purchase_tool_truthfully(buyer):
    tools = rpc(buyer.mcp("tools/list"))["result"]["tools"]

    tool = tools[0]
    schema = tool["inputSchema"]
    assert tool["title"]
    assert "idempotency_key" in tool["description"] and "email" in tool["description"]
    assert (
        "updates" not in tool["description"] and "existing contact is left unchanged" in tool["description"]
    )
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert schema["required"] == ["email"]
    assert set(schema["properties"]) == {"email", "name", "bundle_id", "idempotency_key"}
    key = schema["properties"]["idempotency_key"]
    assert key["pattern"] == "^[A-Za-z0-9._-]{8,128}$"
    assert "minLength" not in key and "maxLength" not in key  # the pattern bounds it (8-128)
    text = json.dumps(tool)
    for forbidden in ('"$schema"', '"$ref"', '"$defs"', '"format"'):
        assert forbidden not in text
    assert tool["outputSchema"]["type"] == "object"
    assert tool["annotations"]["readOnlyHint"] is False
    assert tool["annotations"]["idempotentHint"] is False
    assert tool["annotations"]["openWorldHint"] is True


def test_tools_list_describes_list_bundles_as_read_only_without_arguments(buyer):
    tool = {t["name"]: t for t in rpc(buyer.mcp("tools/list"))["result"]["tools"]}["list_bundles"]

    assert tool["title"] and "bundle_id" in tool["description"]
    assert tool["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}
    assert tool["outputSchema"]["type"] == "object" and tool["outputSchema"]["required"] == ["bundles"]
    hints = tool["annotations"]
    assert (hints["readOnlyHint"], hints["idempotentHint"]) == (True, True)
    assert (hints["destructiveHint"], hints["openWorldHint"]) == (False, False)


def list_bundles(buyer, arguments=None, headers=None) -> dict:
    params = (
        {"name": "list_bundles"} if arguments is None else {"name": "list_bundles", "arguments": arguments}
    )
    return rpc(buyer.mcp("tools/call", params, headers))["result"]


def test_list_bundles_returns_the_catalog_as_structured_content_and_text(buyer):
    tools = rpc(buyer.mcp("tools/list"))["result"]["tools"]
    output_schema = {t["name"]: t for t in tools}["list_bundles"]["outputSchema"]

    for arguments in (None, {}):
        result = list_bundles(buyer, arguments)

        assert result["isError"] is False
        assert result["structuredContent"] == listing()
        assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
        jsonschema.validate(result["structuredContent"], output_schema)
    purchase_enum = tools[0]["inputSchema"]["properties"]["bundle_id"]["enum"]
    assert sorted(b["id"] for b in result["structuredContent"]["bundles"]) == purchase_enum
    assert {b["price"] for b in result["structuredContent"]["bundles"]} == {"0.00"}


def test_list_bundles_with_arguments_is_an_error_result_without_structured_content(buyer):
    result = list_bundles(buyer, {"bundle_id": "agent-starter-kit"})

    assert result["isError"] is True
    assert "structuredContent" not in result
    error = json.loads(result["content"][0]["text"])["error"]
    assert error == {"code": "invalid_request", "message": "list_bundles takes no arguments; got: bundle_id"}


class _UntouchableStore:
    """A store whose every use fails the test: listing must not reach storage or governance."""

    def __getattr__(self, name: str):
        raise AssertionError(f"list_bundles used the store: {name}")


def test_list_bundles_reads_no_storage_and_nothing_of_the_purchase_flow():
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "list_bundles"}}
    request = Request("POST", {"content-type": "application/json"}, json.dumps(message).encode())

    answer = mcp.handle(request, _UntouchableStore(), SimpleNamespace(allowed_origins=()))

    assert answer.status == 200
    assert json.loads(answer.body)["result"]["structuredContent"] == listing()


def test_tools_call_returns_receipt_as_structured_content_and_text(buyer, mail):
    body = rpc(buyer.call_tool({"email": buyer.email, "idempotency_key": buyer.key}))

    result = body["result"]
    assert result["isError"] is False
    receipt = result["structuredContent"]
    assert receipt["status"] == "fulfilled"
    assert receipt["caller"]["channel"] == "mcp"
    assert json.loads(result["content"][0]["text"]) == receipt
    assert len(mail.emails_to(buyer.email)) == 1


def test_tools_call_replay_is_identical_and_sends_nothing(buyer, mail):
    args = {"email": buyer.email, "idempotency_key": buyer.key}
    first = rpc(buyer.call_tool(args))["result"]
    second = rpc(buyer.call_tool(args))["result"]

    assert second["structuredContent"] == first["structuredContent"]
    assert second["content"] == first["content"]
    assert second["_meta"] == {"storefront/replayed": True}
    assert len(mail.emails_to(buyer.email)) == 1


def test_mcp_and_http_receipts_have_the_same_shape(buyer):
    via_mcp = rpc(buyer.call_tool({"email": buyer.email}))["result"]["structuredContent"]
    via_http = buyer.purchase().json()

    assert list(via_mcp) == list(via_http)
    assert [c["name"] for c in via_mcp["checks"]] == [c["name"] for c in via_http["checks"]]
    assert [c["result"] for c in via_mcp["checks"]] == [c["result"] for c in via_http["checks"]]
    assert via_mcp["caller"]["channel"] == "mcp" and via_http["caller"]["channel"] == "http"
    for field in ("status", "operation", "version", "bundle", "billing", "buyer"):
        assert via_mcp[field] == via_http[field]


def test_idempotency_key_header_works_for_mcp_too(buyer, mail):
    headers = {"Idempotency-Key": buyer.key}
    first = rpc(buyer.call_tool({"email": buyer.email}, headers))["result"]
    second = rpc(buyer.call_tool({"email": buyer.email}, headers))["result"]
    assert second["structuredContent"] == first["structuredContent"]
    assert len(mail.emails_to(buyer.email)) == 1


@pytest.mark.parametrize(
    "params",
    [
        {"name": "no_such_tool", "arguments": {}},
        {"arguments": {}},
        {"name": 5},
        {"name": "purchase_free_bundle", "arguments": "email=a@b.co"},
        {"name": "purchase_free_bundle", "arguments": [1]},
        {"name": "list_bundles", "arguments": "all"},
    ],
    ids=[
        "unknown-tool",
        "no-name",
        "name-not-string",
        "arguments-string",
        "arguments-array",
        "list-arguments",
    ],
)
def test_malformed_tool_calls_are_invalid_params(buyer, params):
    body = rpc(buyer.mcp("tools/call", params))
    assert body["error"]["code"] == -32602


def test_params_not_an_object_is_invalid_params(buyer):
    assert rpc(buyer.mcp("tools/list", [1, 2]))["error"]["code"] == -32602


def test_batch_is_rejected_with_400(buyer):
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    response = buyer.http.post(f"{buyer.host}/api/a2a/mcp", json=batch, timeout=10)
    assert response.status_code == 400
    assert rpc(response)["error"]["code"] == -32600


@pytest.mark.parametrize("body", [b"not json", b"{", b"\xff", b""])
def test_body_not_json_is_parse_error_with_null_id(buyer, body):
    response = buyer.post_raw("/api/a2a/mcp", body, {"Content-Type": "application/json"})
    assert response.status_code == 400
    assert rpc(response) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: body is not JSON"},
    }


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        "ping",
        42,
        {"jsonrpc": "2.0"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}},
    ],
    ids=[
        "no-version",
        "wrong-version",
        "null-id",
        "object-id",
        "method-not-string",
        "string",
        "number",
        "nothing",
        "id-only",
        "result-and-error",
    ],
)
def test_invalid_jsonrpc_messages_are_invalid_request(buyer, message):
    response = buyer.http.post(f"{buyer.host}/api/a2a/mcp", json=message, timeout=10)
    assert response.status_code == 400
    assert rpc(response)["error"]["code"] == -32600


@pytest.mark.parametrize("method", ["GET", "DELETE"])
def test_get_and_delete_are_405_with_allow_post(buyer, method):
    response = buyer.http.request(method, f"{buyer.host}/api/a2a/mcp", timeout=10)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"


def test_absent_protocol_version_header_is_accepted(buyer):
    assert "result" in rpc(buyer.mcp("tools/list"))


def test_supported_protocol_version_header_is_accepted(buyer):
    assert "result" in rpc(buyer.mcp("tools/list", headers={"MCP-Protocol-Version": "2025-06-18"}))


def test_unsupported_protocol_version_header_is_400_naming_the_versions_served(buyer):
    response = buyer.mcp("tools/list", headers={"MCP-Protocol-Version": "1999-01-01"})

    assert response.status_code == 400
    error = rpc(response)["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": "1999-01-01",
    }
    assert rpc(response)["id"] == 1


@pytest.mark.parametrize(
    "origin", ["http://localhost:6274", "http://127.0.0.1", "http://[::1]:8080", "https://localhost"]
)
def test_local_origins_are_allowed(buyer, origin):
    assert buyer.mcp("ping", headers={"Origin": origin}).status_code == 200


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://localhost.evil.example"])
def test_foreign_origins_are_403(buyer, origin):
    response = buyer.mcp("ping", headers={"Origin": origin})
    assert response.status_code == 403


def test_configured_origin_is_allowed(host_factory):
    from tests.support import Buyer

    host = host_factory(STOREFRONT_ALLOWED_ORIGINS="agents.example.com, other.example")
    buyer = Buyer(host.url)
    assert buyer.mcp("ping", headers={"Origin": "https://agents.example.com"}).status_code == 200
    assert buyer.mcp("ping", headers={"Origin": "https://evil.example"}).status_code == 403


def test_responses_from_the_client_get_202(buyer):
    response = buyer.http.post(
        f"{buyer.host}/api/a2a/mcp", json={"jsonrpc": "2.0", "id": 9, "result": {}}, timeout=10
    )
    assert response.status_code == 202


@pytest.mark.parametrize(
    ("name", "nearest"),
    [
        ("purchase_free_bundel", "purchase_free_bundle"),
        ("Purchase_Free_Bundle", "purchase_free_bundle"),
        ("list_bundle", "list_bundles"),
    ],
)
def test_a_misspelt_tool_is_invalid_params_naming_the_nearest_tool(buyer, mail, name, nearest):
    body = rpc(buyer.mcp("tools/call", {"name": name, "arguments": {"email": buyer.email}}))

    assert body["error"]["code"] == -32602
    assert body["error"]["message"] == f"unknown tool: {name}; did you mean {nearest}?"
    assert mail.emails_to(buyer.email) == []


def test_a_tool_near_none_is_told_the_tools_there_are(buyer):
    body = rpc(buyer.mcp("tools/call", {"name": "buy", "arguments": {}}))

    assert body["error"]["message"] == "unknown tool: buy; the tools are purchase_free_bundle, list_bundles"


@pytest.mark.parametrize("kind", HOSTILE_TOOL_NAMES)
def test_a_hostile_tool_name_gets_a_short_escaped_invalid_params(buyer, kind):
    name = HOSTILE_TOOL_NAMES[kind]

    body = rpc(buyer.mcp("tools/call", {"name": name, "arguments": {}}))

    assert_unknown_tool_quoted_safely(body["error"], name)


def test_docs_clients_quotes_the_unknown_tool_message_the_endpoint_answers(buyer):
    page = (ROOT / "docs" / "clients.md").read_text()
    (quoted,) = re.findall(r"`(unknown tool: [^`]*)`", page)
    name = re.match(r"unknown tool: (\S+);", quoted)[1]

    body = rpc(buyer.mcp("tools/call", {"name": name, "arguments": {}}))

    assert body["error"]["message"] == quoted
