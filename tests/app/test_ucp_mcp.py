"""UCP's MCP binding end to end through a dev host: the nine tools at /ucp/mcp in both MCP
generations, a checkout created, given its email and completed with one email, a replayed
complete sending nothing, protocol errors as JSON-RPC errors with UCP's code in `data`, and a
platform that signs its MCP POST reading its order."""

from __future__ import annotations

import json
import uuid

import pytest
import requests

from tests.support import HOSTILE_TOOL_NAMES, assert_unknown_tool_quoted_safely, unique_email
from tests.ucp_platform import Platform

APPROVED = "https://platform.example/profile"
LINE = {"line_items": [{"item": {"id": "agent-starter-kit"}, "quantity": 1}]}
VERSION = "2026-07-28"
NAMES = [
    "create_checkout",
    "get_checkout",
    "update_checkout",
    "complete_checkout",
    "cancel_checkout",
    "get_order",
    "search_catalog",
    "lookup_catalog",
    "get_product",
]


@pytest.fixture(scope="module")
def shop(host_factory):
    return host_factory(STOREFRONT_UCP_PLATFORMS=APPROVED)


def rpc(
    shop,
    method: str,
    params: dict,
    *,
    modern: bool = False,
    headers: dict | None = None,
    body: bytes | None = None,
):
    sent = {"Content-Type": "application/json", **(headers or {})}
    if modern:
        params = {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }
        sent |= {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
        if method == "tools/call":
            sent["Mcp-Name"] = params["name"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    data = body if body is not None else json.dumps(message).encode()
    return requests.post(f"{shop.url}/ucp/mcp", data=data, headers=sent, timeout=30)


def call(
    shop, name: str, arguments: dict, *, profile: str = APPROVED, key: str | None = None, modern: bool = False
):
    meta: dict = {"ucp-agent": {"profile": profile}}
    if key:
        meta["idempotency-key"] = key
    return rpc(shop, "tools/call", {"name": name, "arguments": {"meta": meta, **arguments}}, modern=modern)


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_a_checkout_over_mcp_is_created_given_its_email_and_completed_with_one_email(shop, mail, modern):
    email = unique_email("mcp-ucp")
    listed = rpc(shop, "tools/list", {}, modern=modern).json()["result"]["tools"]

    created = call(shop, "create_checkout", {"checkout": LINE}, modern=modern).json()["result"]
    checkout_id = created["structuredContent"]["id"]
    updated = call(
        shop,
        "update_checkout",
        {"id": checkout_id, "checkout": {**LINE, "buyer": {"email": email}}},
        modern=modern,
    ).json()["result"]
    key = str(uuid.uuid4())
    done = call(
        shop, "complete_checkout", {"id": checkout_id, "checkout": {"payment": {}}}, key=key, modern=modern
    )
    again = call(
        shop, "complete_checkout", {"id": checkout_id, "checkout": {"payment": {}}}, key=key, modern=modern
    )

    assert [tool["name"] for tool in listed] == NAMES
    assert created["structuredContent"]["status"] == "incomplete" and created["isError"] is False
    assert json.loads(created["content"][0]["text"]) == created["structuredContent"]
    assert updated["structuredContent"]["status"] == "ready_for_complete"
    completed = done.json()["result"]["structuredContent"]
    assert completed["status"] == "completed" and completed["order"]["id"] == "ord_" + checkout_id[4:]
    assert again.json()["result"]["structuredContent"] == completed
    assert len(mail.emails_to(email)) == 1


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_protocol_errors_are_json_rpc_errors_with_ucps_code(shop, modern):
    unknown_platform = call(
        shop, "search_catalog", {"catalog": {"query": "*"}}, profile="https://127.0.0.1:9/p", modern=modern
    )
    no_key = call(shop, "cancel_checkout", {"id": "chk_" + "a" * 26}, modern=modern)
    missing = call(shop, "get_checkout", {"id": "chk_" + "a" * 26}, modern=modern)

    error = unknown_platform.json()["error"]
    assert (error["code"], error["data"]["code"]) == (-32001, "profile_unreachable")
    assert no_key.json()["error"]["code"] == -32602
    result = missing.json()["result"]
    assert result["structuredContent"]["messages"][0]["code"] == "not_found", "a business outcome"


@pytest.mark.parametrize(
    "profile",
    [
        "https://p.example/\u00e9",
        "https://p.example/\r\nx: y",
        "https://p.example/\x00",
        "https://p.example/\t",
    ],
)
@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_a_profile_no_header_can_carry_is_invalid_params_never_a_500(shop, modern, profile):
    answer = call(shop, "get_checkout", {"id": "chk_" + "a" * 26}, profile=profile, modern=modern)

    assert answer.status_code in (200, 400)
    assert answer.json()["error"]["code"] == -32602
    assert "profile" in answer.json()["error"]["message"]


def test_a_platform_that_signs_its_mcp_post_reads_its_order(shop, mail):
    platform = Platform()
    try:
        email = unique_email("mcp-signed")
        url = f"{shop.url}/ucp/mcp"

        def signed(name: str, arguments: dict, key: str | None = None):
            meta: dict = {"ucp-agent": {"profile": platform.profile_url}}
            if key:
                meta["idempotency-key"] = key
            message = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": name, "arguments": {"meta": meta, **arguments}},
            }
            body = json.dumps(message).encode()
            return requests.post(url, data=body, headers=platform.signed("POST", url, body, key), timeout=30)

        created = signed("create_checkout", {"checkout": {**LINE, "buyer": {"email": email}}}).json()[
            "result"
        ]
        checkout_id = created["structuredContent"]["id"]
        signed("complete_checkout", {"id": checkout_id, "checkout": {"payment": {}}}, key=str(uuid.uuid4()))
        order = signed("get_order", {"id": "ord_" + checkout_id[4:]}).json()
        unsigned = call(
            shop, "get_order", {"id": "ord_" + checkout_id[4:]}, profile=platform.profile_url
        ).json()
    finally:
        platform.close()

    assert order["result"]["structuredContent"]["checkout_id"] == checkout_id
    assert (unsigned["error"]["code"], unsigned["error"]["data"]["code"]) == (-32000, "signature_missing")
    assert len(platform.received) == 1, "the signed complete's order event"


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
def test_a_misspelt_tool_is_invalid_params_naming_the_nearest_ucp_tool(shop, modern):
    misspelt = call(shop, "serch_catalog", {"catalog": {"query": "*"}}, modern=modern)

    assert misspelt.json()["error"] == {
        "code": -32602,
        "message": "unknown tool: serch_catalog; did you mean search_catalog?",
    }


@pytest.mark.parametrize("kind", HOSTILE_TOOL_NAMES)
def test_a_hostile_tool_name_gets_a_short_escaped_invalid_params(shop, kind):
    name = HOSTILE_TOOL_NAMES[kind]

    answer = call(shop, name, {})

    assert_unknown_tool_quoted_safely(answer.json()["error"], name)
