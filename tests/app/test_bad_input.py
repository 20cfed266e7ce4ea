"""Bad input of every kind gets a clear 4xx (or a JSON-RPC error / isError result), never a 500,
and nothing is sent or stored."""

from __future__ import annotations

import json

import pytest

from tests.support import UNKNOWN_BUNDLE_ID

BAD_PAYLOADS = [
    pytest.param({}, 400, "invalid_request", id="missing-email"),
    pytest.param({"email": 42}, 400, "invalid_request", id="email-not-string"),
    pytest.param({"email": None}, 400, "invalid_request", id="email-null"),
    pytest.param({"email": ["a@b.co"]}, 400, "invalid_request", id="email-array"),
    pytest.param({"email": "not-an-email"}, 422, "invalid_email", id="email-syntax"),
    pytest.param({"email": "a@b"}, 422, "invalid_email", id="email-no-tld"),
    pytest.param({"email": "a b@example.org"}, 422, "invalid_email", id="email-space"),
    pytest.param({"email": "x" * 250 + "@example.org"}, 400, "invalid_request", id="email-too-long"),
    pytest.param({"email": "{email}", "name": 7}, 400, "invalid_request", id="name-not-string"),
    pytest.param({"email": "{email}", "name": "n" * 101}, 400, "invalid_request", id="name-too-long"),
    pytest.param({"email": "{email}", "name": "bad\x00name"}, 422, "invalid_name", id="name-control"),
    pytest.param(
        {"email": "{email}", "bundle_id": UNKNOWN_BUNDLE_ID}, 422, "unknown_bundle", id="unknown-bundle"
    ),
    pytest.param({"email": "{email}", "bundle_id": 3}, 400, "invalid_request", id="bundle-not-string"),
    pytest.param({"email": "{email}", "coupon": "FREE"}, 400, "invalid_request", id="unknown-field"),
]


def fill(payload: dict, email: str) -> dict:
    return {k: (email if v == "{email}" else v) for k, v in payload.items()}


@pytest.mark.parametrize(("payload", "status", "code"), BAD_PAYLOADS)
def test_http_bad_arguments_get_a_clear_refusal_receipt(buyer, mail, payload, status, code):
    response = buyer.purchase(fill(payload, buyer.email))

    assert response.status_code == status, response.text
    receipt = response.json()
    assert receipt["status"] == "refused"
    assert receipt["error"]["code"] == code
    assert receipt["error"]["message"]
    assert {c["name"]: c["result"] for c in receipt["checks"]}["input_schema"] == "fail"
    assert receipt["receipt_url"] is None
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(("payload", "status", "code"), BAD_PAYLOADS)
def test_mcp_bad_arguments_get_an_error_result_with_the_refusal_receipt(buyer, mail, payload, status, code):
    response = buyer.call_tool(fill(payload, buyer.email))

    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["code"] == code
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert mail.emails_to(buyer.email) == []


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{", b"\xff\xfe", b"", b"[1,2]", b'"a string"', b"null", b"1e999999", b"[" * 60000],
    ids=["text", "truncated", "binary", "empty", "array", "string", "null", "huge-number", "deep-nesting"],
)
def test_http_malformed_body_is_400_json(buyer, body):
    response = buyer.post_raw("/api/a2a/purchase", body, {"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.json()["status"] == "refused"
    assert response.json()["error"]["code"] in {"invalid_json", "invalid_request"}


def test_http_oversized_body_is_413_json(buyer, mail):
    body = json.dumps({"email": buyer.email, "name": "x" * 70_000}).encode()

    response = buyer.post_raw("/api/a2a/purchase", body, {"Content-Type": "application/json"})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    assert mail.emails_to(buyer.email) == []


def test_mcp_deeply_nested_message_is_a_parse_error_not_a_500(buyer):
    response = buyer.post_raw("/api/a2a/mcp", b"[" * 60000, {"Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_mcp_oversized_message_is_413_jsonrpc_error(buyer):
    message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y" * 70_000}})

    response = buyer.post_raw("/api/a2a/mcp", message.encode(), {"Content-Type": "application/json"})

    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600


def test_foreign_origin_is_403_on_the_purchase_endpoint(buyer, mail):
    response = buyer.purchase(headers={"Origin": "https://evil.example"})

    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden_origin"
    assert mail.emails_to(buyer.email) == []


def _nested_name(depth: int) -> str:
    """A name value of arrays nested `depth` levels deep."""
    return "[" * depth + "]" * depth


# The JSON parser accepts nesting up to about a thousand levels, and later code (the canonical
# request that a key's fingerprint hashes) recursed past the interpreter's limit just under that.
DEPTHS = [65, 100, 500, *range(940, 1021), 5000]


def test_http_json_nested_past_64_levels_is_invalid_json_at_every_depth(buyer, mail):
    answers = {}
    for depth in DEPTHS:  # the object is one level, the name's arrays the rest
        body = (
            f'{{"email": "{buyer.email}", "idempotency_key": "{buyer.key}-{depth}", '
            f'"name": {_nested_name(depth - 1)}}}'
        )
        response = buyer.post_raw("/api/a2a/purchase", body.encode(), {"Content-Type": "application/json"})
        answers[depth] = (response.status_code, response.json()["error"])

    assert {depth: status for depth, (status, _) in answers.items()} == {depth: 400 for depth in DEPTHS}
    assert {error["code"] for _, error in answers.values()} == {"invalid_json"}
    assert {error["message"] for _, error in answers.values()} == {
        "request body refused: arrays and objects nest more than 64 levels deep"
    }
    assert mail.emails_to(buyer.email) == []


def test_mcp_json_nested_past_64_levels_is_a_parse_error_at_every_depth(buyer):
    answers = {}
    for depth in DEPTHS:  # message, params and arguments are three levels, the name's arrays the rest
        arguments = (
            f'{{"email": "{buyer.email}", "idempotency_key": "{buyer.key}-{depth}", '
            f'"name": {_nested_name(depth - 3)}}}'
        )
        message = (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
            f'"params": {{"name": "purchase_free_bundle", "arguments": {arguments}}}}}'
        )
        response = buyer.post_raw("/api/a2a/mcp", message.encode(), {"Content-Type": "application/json"})
        answers[depth] = (response.status_code, response.json().get("error"))

    assert {depth: status for depth, (status, _) in answers.items()} == {depth: 400 for depth in DEPTHS}
    assert {(error["code"], error["message"]) for _, error in answers.values()} == {
        (-32700, "Parse error: arrays and objects nest more than 64 levels deep")
    }


def test_json_nested_exactly_64_levels_is_parsed_on_both_endpoints(buyer):
    name = _nested_name(63)
    http = buyer.post_raw(
        "/api/a2a/purchase",
        f'{{"email": "{buyer.email}", "name": {name}}}'.encode(),
        {"Content-Type": "application/json"},
    )
    mcp = buyer.post_raw(
        "/api/a2a/mcp",
        (
            '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "purchase_free_bundle", '
            f'"arguments": {{"email": "{buyer.email}", "name": {_nested_name(61)}}}}}}}'
        ).encode(),
        {"Content-Type": "application/json"},
    )

    assert http.status_code == 400
    assert (http.json()["error"]["code"], http.json()["error"]["message"]) == (
        "invalid_request",
        "name must be a string",
    )
    assert mcp.status_code == 200
    assert mcp.json()["result"]["structuredContent"]["error"]["message"] == "name must be a string"


LONE_SURROGATES = [
    b'{"email": "a@example.org", "\\udc00": 1}',
    b'{"email": "\\ud800@example.org", "idempotency_key": "surrogate-key-1"}',
    b'{"email": "a@example.org", "name": "x\\ud800", "idempotency_key": "surrogate-key-2"}',
]


@pytest.mark.parametrize("body", LONE_SURROGATES, ids=["field-name", "email", "name"])
def test_lone_surrogate_escapes_are_a_400_not_a_500(buyer, mail, body):
    response = buyer.post_raw("/api/a2a/purchase", body, {"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"


@pytest.mark.parametrize("body", LONE_SURROGATES, ids=["field-name", "email", "name"])
def test_lone_surrogate_escapes_in_a_tool_call_are_a_parse_error(buyer, body):
    arguments = body.decode()
    message = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "purchase_free_bundle", '
    )
    message += f'"arguments": {arguments}}}}}'

    response = buyer.post_raw("/api/a2a/mcp", message.encode(), {"Content-Type": "application/json"})

    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32700
