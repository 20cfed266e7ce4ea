"""MCP 2026-07-28 over real HTTP (raw JSON-RPC against a dev host): the request checks in their
order, discovery and caching hints, one receipt across both protocol generations, and asking for
a missing email (input_required) without counting or sending anything before the answer."""

from __future__ import annotations

import base64

import pytest

from devstack.services import dev_settings
from shared.config.hashing import Hasher
from shared.protocols.mcp import request_state
from tests.support import HOSTILE_TOOL_NAMES, UNKNOWN_BUNDLE_ID, Buyer, assert_unknown_tool_quoted_safely

VERSION = "2026-07-28"
FORM = {"elicitation": {"form": {}}}


def meta(capabilities: dict | None = None, version: str = VERSION) -> dict:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    }


def modern(
    buyer: Buyer,
    method: str,
    params: dict | None = None,
    *,
    capabilities: dict | None = None,
    headers: dict | None = None,
    rpc_id: object = 7,
):
    """A request as a 2026-07-28 client sends it: _meta in the body, the body mirrored in headers."""
    params = {**(params or {}), "_meta": meta(capabilities)} if params is not False else None
    mirrored = {"MCP-Protocol-Version": VERSION, "Mcp-Method": method}
    if method == "tools/call":
        mirrored["Mcp-Name"] = params["name"]
    return buyer.mcp(method, params, {**mirrored, **(headers or {})}, rpc_id=rpc_id)


def buy(buyer: Buyer, arguments: dict, capabilities: dict | None = None, **extra) -> dict:
    params = {"name": "purchase_free_bundle", "arguments": arguments, **extra}
    response = modern(buyer, "tools/call", params, capabilities=capabilities)
    assert response.status_code == 200, response.text
    return response.json()["result"]


def answer(action: str, content: dict | None = None) -> dict:
    reply = {"action": action}
    if content is not None:
        reply["content"] = content
    return {"buyer": reply}


@pytest.fixture(scope="module")
def limited(host_factory):
    """A host allowing one purchase an hour per client: whatever counts shows at once."""
    host = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE="governancelimited")
    yield host
    host.stop()


# --- discovery and lists ----------------------------------------------------------------------


def test_server_discover_names_every_version_served_and_is_cacheable(buyer):
    result = modern(buyer, "server/discover").json()["result"]

    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == [VERSION, "2025-11-25", "2025-06-18", "2025-03-26"]
    assert "tools" in result["capabilities"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "storefront"
    assert "idempotency_key" in result["instructions"]
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public"


def test_tools_list_carries_caching_hints_and_the_same_tools_in_the_same_order_as_2025(buyer):
    first = modern(buyer, "tools/list")
    second = modern(buyer, "tools/list", rpc_id=8)
    legacy = buyer.mcp("tools/list").json()["result"]

    result = first.json()["result"]
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] > 0
    assert result["cacheScope"] == "public"
    assert result["tools"] == legacy["tools"]
    assert first.content.replace(b'"id": 7', b'"id": 8') == second.content


def test_a_cursor_the_store_never_gave_is_invalid_params(buyer):
    response = modern(buyer, "tools/list", {"cursor": "page-2"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize("method", ["initialize", "ping", "logging/setLevel", "prompts/list", "nope/nope"])
def test_methods_this_revision_removed_or_never_had_are_404_method_not_found(buyer, method):
    response = modern(buyer, method)

    assert response.status_code == 404
    assert set(response.json()) == {"jsonrpc", "id", "error"}
    assert response.json()["id"] == 7
    assert response.json()["error"]["code"] == -32601


# --- the request checks, in order, keeping the id --------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        False,
        {},
        {"_meta": "2026-07-28"},
        {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}},
        {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}},
    ],
    ids=["no-params", "no-meta", "meta-not-object", "no-version", "no-capabilities"],
)
def test_a_request_without_its_meta_is_invalid_params_with_its_id(buyer, params):
    headers = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"}
    response = buyer.mcp("tools/list", None if params is False else params, headers, rpc_id="abc")

    assert response.status_code == 400
    assert response.json()["id"] == "abc"
    assert response.json()["error"]["code"] == -32602


def test_capabilities_that_are_not_an_object_are_invalid_params(buyer):
    params = {"_meta": {**meta(), "io.modelcontextprotocol/clientCapabilities": ["elicitation"]}}
    response = buyer.mcp("tools/list", params, {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    "headers",
    [
        {"Mcp-Method": "tools/list"},
        {"Mcp-Method": None},
        {"Mcp-Name": "list_bundles"},
        {"Mcp-Name": None},
        {"Mcp-Name": "=?base64?bGlzdF9idW5kbGVz?="},
        {"Mcp-Name": "=?base64?not base64?="},
        {"MCP-Protocol-Version": "2025-11-25"},
    ],
    ids=["method", "no-method", "name", "no-name", "base64-name", "bad-base64", "legacy-version-header"],
)
def test_headers_that_disagree_with_the_body_are_400_header_mismatch_and_nothing_runs(buyer, mail, headers):
    arguments = {"email": buyer.email, "idempotency_key": buyer.key}
    params = {"name": "purchase_free_bundle", "arguments": arguments, "_meta": meta()}
    sent = {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "purchase_free_bundle"}
    sent = {k: v for k, v in {**sent, **headers}.items() if v is not None}

    response = buyer.mcp("tools/call", params, sent, rpc_id=41)

    assert response.status_code == 400, response.text
    assert response.json()["id"] == 41
    assert response.json()["error"]["code"] == -32020
    assert mail.emails_to(buyer.email) == []


def test_a_base64_mcp_name_and_whitespace_around_header_values_are_read_as_the_name(buyer, mail):
    encoded = base64.b64encode(b"purchase_free_bundle").decode()
    params = {"name": "purchase_free_bundle", "arguments": {"email": buyer.email}, "_meta": meta()}
    headers = {"MCP-Protocol-Version": f"{VERSION} ", "Mcp-Method": "tools/call\t"}

    plain = buyer.mcp("tools/call", params, {**headers, "Mcp-Name": f"=?base64?{encoded}?="})

    assert plain.status_code == 200, plain.text
    assert plain.json()["result"]["structuredContent"]["status"] == "fulfilled"
    assert len(mail.emails_to(buyer.email)) == 1


def test_a_version_nobody_serves_is_named_before_the_headers_only_2026_07_28_requires(buyer):
    headers = {"MCP-Protocol-Version": "2027-01-01"}

    response = buyer.mcp("tools/list", {"_meta": meta(version="2027-01-01")}, headers)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32022
    assert response.json()["error"]["data"]["requested"] == "2027-01-01"


def test_a_body_declaring_2026_07_28_without_the_header_or_its_capabilities_is_invalid_params(buyer):
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}

    response = buyer.mcp("tools/list", params)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602


@pytest.mark.parametrize("requested", ["1999-01-01", "2026-12-31", "v999.0.0"])
def test_a_version_nobody_serves_is_400_naming_what_is_served(buyer, requested):
    headers = {"MCP-Protocol-Version": requested, "Mcp-Method": "tools/list"}
    params = {"_meta": meta(version=requested)}

    response = buyer.mcp("tools/list", params, headers)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == -32022
    assert error["data"] == {
        "supported": [VERSION, "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": requested,
    }


def test_meta_naming_another_version_than_the_header_is_a_header_mismatch(buyer):
    params = {"_meta": meta(version="v999.0.0")}
    response = buyer.mcp("tools/list", params, {"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32020


def test_a_parsed_body_that_is_not_json_rpc_keeps_its_id(buyer):
    response = buyer.http.post(
        f"{buyer.host}/api/a2a/mcp",
        json={"jsonrpc": "1.0", "id": 99, "method": "tools/list"},
        headers={"MCP-Protocol-Version": VERSION, "Mcp-Method": "tools/list"},
        timeout=10,
    )

    assert response.status_code == 400
    assert response.json()["id"] == 99
    assert response.json()["error"]["code"] == -32600


# --- one receipt whichever generation is spoken -------------------------------------------------


def test_one_key_over_2026_then_2025_then_http_is_one_purchase_one_email_the_same_bytes(buyer, mail):
    arguments = {"email": buyer.email, "idempotency_key": buyer.key}

    modern_result = buy(buyer, arguments)
    legacy_result = buyer.call_tool(arguments).json()["result"]
    http = buyer.purchase(arguments)

    assert modern_result["resultType"] == "complete"
    assert modern_result["isError"] is False
    text = modern_result["content"][0]["text"]
    assert legacy_result["content"][0]["text"] == text
    assert http.content.decode() == text
    assert legacy_result["_meta"] == {"storefront/replayed": True}
    assert modern_result["structuredContent"]["caller"]["channel"] == "mcp"
    assert len(mail.emails_to(buyer.email)) == 1


def test_list_bundles_answers_the_catalog_with_result_type(buyer):
    result = modern(buyer, "tools/call", {"name": "list_bundles", "arguments": {}}).json()["result"]

    assert result["resultType"] == "complete"
    assert result["structuredContent"]["bundles"]


# --- a missing email is asked for -------------------------------------------------------------


def test_a_missing_email_is_asked_for_and_the_answer_completes_the_purchase_under_its_key(buyer, mail):
    arguments = {"bundle_id": "agent-starter-kit", "idempotency_key": buyer.key}

    asked = buy(buyer, arguments, FORM)
    form = asked["inputRequests"]["buyer"]
    done = buy(
        buyer,
        arguments,
        FORM,
        inputResponses=answer("accept", {"email": buyer.email, "name": "Ada"}),
        requestState=asked["requestState"],
    )
    again = buyer.call_tool({**arguments, "email": buyer.email, "name": "Ada"}).json()["result"]

    assert asked["resultType"] == "input_required"
    assert form["method"] == "elicitation/create"
    assert form["params"]["mode"] == "form"
    assert form["params"]["requestedSchema"]["required"] == ["email"]
    assert set(form["params"]["requestedSchema"]["properties"]) == {"email", "name"}
    assert buyer.email not in asked["requestState"] and buyer.key not in asked["requestState"]
    assert done["resultType"] == "complete"
    assert done["structuredContent"]["status"] == "fulfilled"
    assert again["content"] == done["content"]
    assert len(mail.emails_to(buyer.email)) == 1
    assert mail.emails_to(buyer.email)[0]["to"][0]["name"] == "Ada"


def test_the_form_asks_only_for_the_email_when_the_call_named_the_buyer(buyer):
    asked = buy(buyer, {"name": "Grace"}, {"elicitation": {}})

    assert set(asked["inputRequests"]["buyer"]["params"]["requestedSchema"]["properties"]) == {"email"}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_form_refuses_and_sends_or_counts_nothing(host_factory, mail, action):
    host = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE=f"governance{action}")
    buyer = Buyer(host.url)

    for _ in range(3):
        asked = buy(buyer, {"idempotency_key": buyer.key}, FORM)
        refused = buy(
            buyer,
            {"idempotency_key": buyer.key},
            FORM,
            inputResponses=answer(action),
            requestState=asked["requestState"],
        )
        assert refused["isError"] is True
        assert refused["structuredContent"]["status"] == "refused"
        assert refused["structuredContent"]["error"]["code"] == "email_declined"
    bought = buy(buyer, {"email": buyer.email, "idempotency_key": buyer.key})

    assert bought["structuredContent"]["status"] == "fulfilled"
    assert len(mail.emails_to(buyer.email)) == 1
    host.stop()


def test_a_client_that_cannot_answer_gets_the_validation_error(buyer):
    for capabilities in ({}, {"elicitation": {"url": {}}}, {"sampling": {}}):
        result = buy(buyer, {"idempotency_key": buyer.key}, capabilities)
        assert result["resultType"] == "complete"
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["message"] == "email is required"


def test_other_bad_arguments_are_refused_rather_than_asked_about(buyer):
    result = buy(buyer, {"bundle_id": UNKNOWN_BUNDLE_ID}, FORM)

    assert result["resultType"] == "complete"
    assert result["structuredContent"]["status"] == "refused"


@pytest.mark.parametrize(
    "responses",
    [
        None,
        {},
        {"other": {"action": "accept"}},
        answer("accept"),
        answer("accept", {"name": "X"}),
        answer("maybe"),
    ],
    ids=["none", "empty", "other-key", "no-content", "no-email", "unknown-action"],
)
def test_an_answer_without_an_email_is_asked_again(buyer, mail, responses):
    asked = buy(buyer, {}, FORM)
    extra = {"requestState": asked["requestState"]}
    if responses is not None:
        extra["inputResponses"] = responses

    again = buy(buyer, {}, FORM, **extra)

    assert again["resultType"] == "input_required"
    assert "buyer" in again["inputRequests"]


def test_answers_without_the_state_are_asked_again_not_taken(buyer, mail):
    result = buy(buyer, {}, FORM, inputResponses=answer("accept", {"email": buyer.email}))

    assert result["resultType"] == "input_required"
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s: s + "-TAMPERED",
        lambda s: s[:-1] + ("0" if s[-1] != "0" else "1"),
        lambda s: (
            "rs1." + base64.urlsafe_b64encode(b'{"exp":9999999999}').decode().rstrip("=") + "." + s[-64:]
        ),
        lambda s: "",
        lambda s: "é" * 10,
        lambda s: 42,
    ],
    ids=["suffix", "mac", "forged-claims", "empty", "non-ascii", "not-a-string"],
)
def test_an_altered_or_forged_state_is_invalid_params_and_nothing_is_sent(buyer, mail, tamper):
    asked = buy(buyer, {}, FORM)
    params = {
        "name": "purchase_free_bundle",
        "arguments": {},
        "inputResponses": answer("accept", {"email": buyer.email}),
        "requestState": tamper(asked["requestState"]),
    }

    response = modern(buyer, "tools/call", params, capabilities=FORM, rpc_id=5)

    assert response.status_code == 400
    assert response.json()["id"] == 5
    assert response.json()["error"]["code"] == -32602
    assert mail.emails_to(buyer.email) == []


def test_a_state_moved_to_another_request_is_refused(buyer, mail):
    asked = buy(buyer, {"bundle_id": "agent-starter-kit"}, FORM)
    params = {
        "name": "purchase_free_bundle",
        "arguments": {"bundle_id": "agent-starter-kit", "name": "Someone Else"},
        "inputResponses": answer("accept", {"email": buyer.email}),
        "requestState": asked["requestState"],
    }

    response = modern(buyer, "tools/call", params, capabilities=FORM)

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ({"email": "not-an-address"}, "email is not a valid address"),
        ({"email": "a@localhost"}, "email is not a valid address"),
        ({"email": 5}, "email must be a string"),
        ({"email": ["a@example.org", "b@example.org"]}, "email must be a string"),
        ({"email": "BUYER", "name": "St.John Smith https://evil.example"}, "name must be"),
    ],
    ids=["not-an-address", "no-domain", "number", "list", "link-in-name"],
)
def test_an_answer_the_store_would_refuse_is_asked_again_saying_why_and_counts_nothing(
    limited, mail, content, problem
):
    buyer = Buyer(limited.url)
    content = {k: buyer.email if v == "BUYER" else v for k, v in content.items()}
    asked = buy(buyer, {}, FORM)

    again = buy(buyer, {}, FORM, inputResponses=answer("accept", content), requestState=asked["requestState"])
    bought = buy(buyer, {"email": buyer.email})

    assert again["resultType"] == "input_required"
    assert problem in again["inputRequests"]["buyer"]["params"]["message"]
    assert bought["structuredContent"]["status"] == "fulfilled"  # the one purchase this hour
    assert len(mail.emails_to(buyer.email)) == 1


def test_a_state_past_its_time_is_asked_again_not_refused(buyer, mail):
    hasher = Hasher(dev_settings()["STOREFRONT_HASH_SECRET"])
    claims = {"method": "tools/call", "tool": "purchase_free_bundle", "arguments": request_state.digest({})}
    old = request_state.seal(hasher, claims, now=1_000_000, ttl=60)

    again = buy(buyer, {}, FORM, inputResponses=answer("accept", {"email": buyer.email}), requestState=old)

    assert again["resultType"] == "input_required"
    assert "expired" in again["inputRequests"]["buyer"]["params"]["message"]
    assert mail.emails_to(buyer.email) == []


def test_a_replay_with_the_same_answer_and_state_returns_the_receipt_once_sent(buyer, mail):
    arguments = {"idempotency_key": buyer.key}
    asked = buy(buyer, arguments, FORM)
    retry = {
        "inputResponses": answer("accept", {"email": buyer.email}),
        "requestState": asked["requestState"],
    }

    first, second = buy(buyer, arguments, FORM, **retry), buy(buyer, arguments, FORM, **retry)

    assert first["content"] == second["content"]
    assert second["_meta"]["storefront/replayed"] is True
    assert len(mail.emails_to(buyer.email)) == 1


def test_a_misspelt_tool_is_invalid_params_naming_the_nearest_tool(buyer, mail):
    params = {"name": "purchase_free_bundel", "arguments": {"email": buyer.email}}

    response = modern(buyer, "tools/call", params)

    assert response.status_code == 400
    assert response.json()["error"] == {
        "code": -32602,
        "message": "unknown tool: purchase_free_bundel; did you mean purchase_free_bundle?",
    }
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize("kind", HOSTILE_TOOL_NAMES)
def test_a_hostile_tool_name_gets_a_short_escaped_invalid_params(buyer, kind):
    """The name, mirrored in Mcp-Name as the spec's base64 form (a header holds no controls), cut
    to what one header line carries."""
    name = HOSTILE_TOOL_NAMES[kind][:30_000]
    encoded = base64.b64encode(name.encode()).decode()

    response = modern(
        buyer, "tools/call", {"name": name, "arguments": {}}, headers={"Mcp-Name": f"=?base64?{encoded}?="}
    )

    assert_unknown_tool_quoted_safely(response.json()["error"], name)
