"""Discovery over real HTTP, as an agent meets it: the catalog at GET /api/bundles and through the MCP
tool list_bundles, and the store's keys at the domain root, /.well-known/jwks.json, which receipts
and their pages now name."""

from __future__ import annotations

import re

import requests

from devstack.ports import free_port
from devstack.run import storage_connection
from shared.purchase.catalog import listing
from tests.support import Buyer

ROOT_JWKS = "/.well-known/jwks.json"
API_JWKS = "/api/.well-known/jwks.json"
SAME_HEADERS = ("Content-Type", "Cache-Control", "Content-Length")


def list_bundles(buyer: Buyer) -> requests.Response:
    return buyer.mcp("tools/call", {"name": "list_bundles", "arguments": {}})


# --- GET /api/bundles ------------------------------------------------------------------------------


def test_get_bundles_answers_the_catalog_as_json_the_same_as_the_mcp_tool(buyer):
    answer = buyer.http.get(f"{buyer.host}/api/bundles", timeout=10)
    via_mcp = list_bundles(buyer).json()["result"]["structuredContent"]

    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/json"
    assert answer.headers["Cache-Control"] == "public, max-age=300"
    assert answer.json() == listing() == via_mcp


def test_head_on_bundles_answers_as_get_without_a_body(buyer):
    get = buyer.http.get(f"{buyer.host}/api/bundles", timeout=10)
    head = buyer.http.head(f"{buyer.host}/api/bundles", timeout=10)

    assert head.status_code == 200
    assert {h: head.headers[h] for h in SAME_HEADERS} == {h: get.headers[h] for h in SAME_HEADERS}
    assert head.content == b""


def test_listing_never_uses_up_the_purchase_rate_limit(host_factory):
    host = host_factory(STOREFRONT_RATE_LIMIT_PER_HOUR="1", STOREFRONT_GOVERNANCE_TABLE="governancelisting")
    buyer = Buyer(host.url)

    for _ in range(10):
        assert list_bundles(buyer).json()["result"]["isError"] is False
        assert buyer.http.get(f"{host.url}/api/bundles", timeout=10).status_code == 200
    first, second = buyer.purchase(), buyer.purchase({"email": "second-" + buyer.email})

    assert first.status_code == 200, first.text
    assert second.status_code == 429, "the limit of one purchase an hour is in force"


def test_listing_answers_with_storage_unreachable_because_it_reads_none(host_factory):
    host = host_factory(
        AzureWebJobsStorage=storage_connection(free_port(), free_port(), free_port()),
        STOREFRONT_STORAGE_TIMEOUT_SECONDS="2",
    )
    buyer = Buyer(host.url)

    health = buyer.http.get(f"{host.url}/api/health", timeout=30)
    over_http = buyer.http.get(f"{host.url}/api/bundles", timeout=10)
    over_mcp = list_bundles(buyer)

    assert (health.status_code, health.json()["status"]) == (503, "unavailable")
    assert over_http.status_code == 200 and over_http.json() == listing()
    assert over_mcp.status_code == 200
    assert over_mcp.json()["result"]["structuredContent"] == listing()


# --- the JWKS at the domain root -------------------------------------------------------------------


def test_the_root_jwks_has_the_same_body_and_headers_as_the_api_one(host):
    root = requests.get(f"{host.url}{ROOT_JWKS}", timeout=10)
    api = requests.get(f"{host.url}{API_JWKS}", timeout=10)

    assert root.status_code == api.status_code == 200
    assert root.content == api.content
    assert root.json()["keys"]
    assert {h: root.headers[h] for h in SAME_HEADERS} == {h: api.headers[h] for h in SAME_HEADERS}
    assert root.headers["Cache-Control"] == "public, max-age=300"


def test_head_on_the_root_jwks_answers_as_get_without_a_body(host):
    get = requests.get(f"{host.url}{ROOT_JWKS}", timeout=10)
    head = requests.head(f"{host.url}{ROOT_JWKS}", timeout=10)

    assert head.status_code == 200
    assert head.headers["Content-Length"] == str(len(get.content))
    assert head.content == b""


def test_a_wrong_method_on_the_root_jwks_is_405_with_allow(host):
    for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS"):
        answer = requests.request(method, f"{host.url}{ROOT_JWKS}", timeout=10)

        assert (answer.status_code, answer.headers["Allow"]) == (405, "GET, HEAD"), method
        assert answer.json()["error"]["code"] == "method_not_allowed"


def test_the_receipt_page_and_the_receipt_schema_name_the_root_jwks_and_it_serves_the_keys(buyer):
    receipt = buyer.purchase().json()
    url = f"{buyer.host}/api/receipts/{receipt['receipt_id']}"
    page = buyer.http.get(url, headers={"Accept": "text/html"}, timeout=10).text
    purchase_tool = buyer.mcp("tools/list").json()["result"]["tools"][0]
    signature = purchase_tool["outputSchema"]["properties"]["signature"]["anyOf"][0]["description"]

    linked = re.findall(r'href="([^"]*jwks[^"]*)"', page)
    named = re.findall(r"/[\w./-]*jwks\.json", signature)
    keys = requests.get(f"{buyer.host}{ROOT_JWKS}", timeout=10).json()["keys"]

    assert linked == named == [ROOT_JWKS]
    assert receipt["signature"]["kid"] in [key["kid"] for key in keys]
