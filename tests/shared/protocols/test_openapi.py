"""The OpenAPI document (shared/protocols/openapi/): valid OpenAPI 3.1, one source for the purchase's
shapes, every HTTP route of the app described, served at /api/openapi.json for the public base URL
and built only when first asked for. Schemathesis holds the live answers to it
(tests/shared/protocols/test_schemathesis.py)."""

from __future__ import annotations

import json
import os
import subprocess

import requests
from openapi_spec_validator import validate

from shared.config import errors
from shared.protocols.mcp import tools as mcp
from shared.protocols.openapi import document as openapi
from shared.purchase.schema import KEY_PATTERN
from tests.support import HANG_SECONDS, ROOT, fresh_python

# JSON-RPC endpoints: one URL, the operation in the body, described by their own protocols.
JSON_RPC_ROUTES = {"api/a2a/mcp", "api/a2a"}
# UCP's routes: UCP's own OpenAPI document describes them (services/shopping/rest.openapi.json,
# which the business profile names), not the store's.
UCP_ROUTES = {
    ".well-known/ucp",
    "ucp/catalog/{operation}",
    "ucp/checkout-sessions",
    "ucp/checkout-sessions/{id}",
    "ucp/checkout-sessions/{id}/{action}",
    "ucp/orders/{id}",
    "ucp/mcp",
}
# Every path no other route serves: its 404 is in the document's description, not a path of it.
CATCH_ALL = "{*path}"
# The errors of other endpoints: a download token's (401, 403), a receipt's or an unknown path's
# 404, a wrong method's 405 (the MethodNotAllowed response) and the MCP transport's.
NOT_PURCHASE_ERRORS = {
    errors.InvalidToken,
    errors.Forbidden,
    errors.NotFound,
    errors.MethodNotAllowed,
    errors.ProtocolError,
}


def _document() -> dict:
    return openapi.document("https://shop.example.org")


def _subclasses(cls: type) -> list[type]:
    return [cls, *(sub for child in cls.__subclasses__() for sub in _subclasses(child))]


def _http_routes() -> set[str]:
    """The app's HTTP routes, indexed in a fresh interpreter (an app indexes once per process)."""
    probe = (
        "import json, function_app\n"
        "print(json.dumps([f.get_trigger().route for f in function_app.app.get_functions()"
        " if f.is_http_function()]))\n"
    )
    env = {**os.environ, "AzureWebJobsStorage": "UseDevelopmentStorage=true"}
    found = fresh_python(probe, env)
    assert found.returncode == 0, found.stderr
    return set(json.loads(found.stdout))


def test_the_document_is_valid_openapi_3_1():
    document = _document()

    validate(document)
    assert document["openapi"] == "3.1.0"


def test_every_http_route_of_the_app_is_described_but_the_json_rpc_endpoints():
    described = set(_document()["paths"])

    assert described == {"/" + route for route in _http_routes() - JSON_RPC_ROUTES - UCP_ROUTES - {CATCH_ALL}}


def test_the_purchase_takes_the_mcp_tools_input_schema_and_answers_its_output_schema():
    document = _document()
    schemas = document["components"]["schemas"]
    post = document["paths"]["/api/a2a/purchase"]["post"]
    body = post["requestBody"]["content"]["application/json"]["schema"]
    receipt = {"$ref": "#/components/schemas/Receipt"}

    assert schemas["PurchaseRequest"] == mcp.TOOL["inputSchema"]
    assert schemas["Receipt"] == mcp.TOOL["outputSchema"]
    assert body == {"$ref": "#/components/schemas/PurchaseRequest"}
    answers = {status: r["content"]["application/json"]["schema"] for status, r in post["responses"].items()}
    # Refused before the purchase runs, so without a receipt: a foreign Origin, a bad signature.
    assert {status for status, schema in answers.items() if schema != receipt} == {"401", "403"}


def test_the_bundle_listing_answers_the_list_bundles_tools_output_schema():
    document = _document()
    answer = document["paths"]["/api/bundles"]["get"]["responses"]["200"]["content"]["application/json"]

    assert answer["schema"] == {"$ref": "#/components/schemas/Bundles"}
    assert document["components"]["schemas"]["Bundles"] == mcp.LIST_TOOL["outputSchema"]


def test_every_status_the_purchase_flow_can_refuse_with_is_documented():
    refusals = {
        cls.status
        for cls in _subclasses(errors.StorefrontError)[1:]
        if not any(issubclass(cls, other) for other in NOT_PURCHASE_ERRORS)
    }
    responses = _document()["paths"]["/api/a2a/purchase"]["post"]["responses"]

    assert {str(status) for status in refusals} | {"200", "403"} == set(responses)


def test_the_idempotency_headers_are_documented_where_the_purchase_sends_them():
    post = _document()["paths"]["/api/a2a/purchase"]["post"]
    responses = post["responses"]

    assert post["parameters"][0] == {
        "name": "Idempotency-Key",
        "in": "header",
        "required": False,
        "description": "Used when the body has no `idempotency_key`.",
        "schema": {"type": "string", "pattern": KEY_PATTERN},
    }
    # The rest are Web Bot Auth's optional headers (docs/agents.md).
    signing = post["parameters"][1:]
    assert [(p["name"], p["in"], p["required"]) for p in signing] == [
        ("Signature-Input", "header", False),
        ("Signature", "header", False),
        ("Signature-Agent", "header", False),
    ]
    assert set(responses["200"]["headers"]) == {"Idempotent-Replayed"}
    assert {status for status, r in responses.items() if "Retry-After" in r.get("headers", {})} == {
        "409",
        "429",
        "503",
    }
    assert [r["headers"]["Retry-After"]["required"] for r in map(responses.get, ("409", "429", "503"))] == [
        True,
        True,
        False,
    ]


def test_only_the_day_listing_asks_for_the_function_key_as_code_or_x_functions_key():
    document = _document()
    secured = {
        (path, method): operation["security"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if "security" in operation
    }

    assert secured == {
        ("/api/receipts", "get"): [{"functionKeyQuery": []}, {"functionKeyHeader": []}],
        ("/api/receipts", "head"): [{"functionKeyQuery": []}, {"functionKeyHeader": []}],
    }
    assert document["components"]["securitySchemes"] == {
        "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
        "functionKeyHeader": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
    }
    assert "security" not in document


def test_the_host_serves_the_document_for_its_public_base_url(host_factory):
    host = host_factory(STOREFRONT_PUBLIC_BASE_URL="https://shop.example.org/")

    answer = requests.get(f"{host.url}/api/openapi.json", timeout=10)
    head = requests.head(f"{host.url}/api/openapi.json", timeout=10)

    assert answer.status_code == head.status_code == 200
    assert answer.headers["Content-Type"] == head.headers["Content-Type"] == "application/json"
    assert answer.json() == _document()
    assert answer.json()["servers"] == [{"url": "https://shop.example.org"}]
    assert head.content == b"" and head.headers["Content-Length"] == str(len(answer.content))


def test_importing_the_app_neither_imports_nor_builds_the_document():
    probe = (
        "import sys, function_app\nprint('shared.protocols.openapi.document' in sys.modules)\n"
        "from shared.protocols.openapi import document\nprint(document._encoded.cache_info().currsize)\n"
    )
    env = {**os.environ, "AzureWebJobsStorage": "UseDevelopmentStorage=true"}

    result = fresh_python(probe, env)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "0"]


def test_the_document_never_changes_the_schemas_the_mcp_tool_publishes():
    before = json.dumps(mcp.TOOL, sort_keys=True)
    document = _document()

    document["components"]["schemas"]["PurchaseRequest"]["properties"].clear()
    document["components"]["schemas"]["Receipt"]["required"].clear()

    assert json.dumps(mcp.TOOL, sort_keys=True) == before
    assert _document()["components"]["schemas"]["PurchaseRequest"] == mcp.TOOL["inputSchema"]


def test_the_docs_check_fetches_and_validates_the_served_document(host, tmp_path):
    doc = (ROOT / "docs" / "clients.md").read_text()
    lines = [
        line for line in doc.splitlines() if "openapi.json" in line and line.startswith(("curl", ".venv"))
    ]
    script = "\n".join(
        line.replace("http://localhost:7071", host.url).replace(".venv/", f"{ROOT}/.venv/") for line in lines
    )

    done = subprocess.run(
        ["bash", "-ec", script], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_SECONDS
    )

    assert len(lines) == 1 and done.returncode == 0, done.stderr
    assert done.stdout.split()[:3] == ["3.1.0", str(len(_document()["paths"])), "paths"]
    assert list(tmp_path.iterdir()) == [], "the check leaves no file where it runs (a publish would ship it)"
