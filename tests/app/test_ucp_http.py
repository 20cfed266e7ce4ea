"""UCP end to end through a dev host: the business profile as platforms fetch it, the catalog
behind negotiation, each refusal with UCP's code and status, and docs/ucp.md's curl run as written."""

from __future__ import annotations

import re

import pytest
import requests

from shared.protocols.ucp.catalog import SEARCH, VERSION
from shared.purchase.catalog import BUNDLES
from tests.agents import KeyDirectory
from tests.support import ROOT, UNKNOWN_BUNDLE_ID, json_answers_of

APPROVED = "https://platform.example/profile"
AGENT = {"UCP-Agent": f'profile="{APPROVED}"', "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def shop(host_factory):
    return host_factory(STOREFRONT_UCP_PLATFORMS=APPROVED)


def test_the_profile_is_served_as_platforms_fetch_it(shop):
    answer = requests.get(f"{shop.url}/.well-known/ucp", timeout=10)
    jwks = requests.get(f"{shop.url}/.well-known/jwks.json", timeout=10).json()

    assert answer.status_code == 200
    assert "public" in answer.headers["Cache-Control"]
    assert int(re.search(r"max-age=(\d+)", answer.headers["Cache-Control"])[1]) >= 60
    profile = answer.json()
    assert profile["ucp"]["version"] == VERSION and profile["ucp"]["payment_handlers"] == {}
    services = profile["ucp"]["services"]["dev.ucp.shopping"]
    assert [(s["transport"], s["endpoint"]) for s in services] == [
        ("rest", "http://localhost:7071/ucp"),
        ("mcp", "http://localhost:7071/ucp/mcp"),
    ]
    assert [k["kid"] for k in profile["keys"]] == [k["kid"] for k in jwks["keys"]]
    assert all((k["alg"], k["use"]) == ("ES256", "sig") for k in profile["keys"])
    again = requests.get(
        f"{shop.url}/.well-known/ucp", headers={"If-None-Match": answer.headers["ETag"]}, timeout=10
    )
    assert again.status_code == 304
    etag = answer.headers["ETag"]
    for validators in (f"W/{etag}", f'"other", {etag}', "*"):  # as caches send it back
        url = f"{shop.url}/.well-known/ucp"
        cached = requests.get(url, headers={"If-None-Match": validators}, timeout=10)
        assert cached.status_code == 304, validators


def test_a_pre_approved_platform_searches_looks_up_and_gets_a_product(shop):
    search = requests.post(f"{shop.url}/ucp/catalog/search", json={"query": "*"}, headers=AGENT, timeout=10)
    lookup = requests.post(
        f"{shop.url}/ucp/catalog/lookup", json={"ids": list(BUNDLES)}, headers=AGENT, timeout=10
    )
    product = requests.post(
        f"{shop.url}/ucp/catalog/product", json={"id": UNKNOWN_BUNDLE_ID}, headers=AGENT, timeout=10
    )

    assert [p["id"] for p in search.json()["products"]] == list(BUNDLES)
    assert [p["id"] for p in lookup.json()["products"]] == list(BUNDLES)
    assert product.status_code == 200 and product.json()["messages"][0]["code"] == "not_found"


def test_each_negotiation_refusal_has_ucps_code_and_status(shop):
    served = KeyDirectory()
    served.document = {
        "ucp": {"version": "2026-01-11", "capabilities": {SEARCH: [{"version": "2026-01-11"}]}}
    }
    try:
        cases = {
            None: ("invalid_profile_url", 400),
            'profile="https://127.0.0.1:9/p"': ("profile_unreachable", 424),
            f'profile="{served.origin}/.well-known/ucp"': ("version_unsupported", 422),
        }
        for header, expected in cases.items():
            headers = {"Content-Type": "application/json", **({"UCP-Agent": header} if header else {})}
            answer = requests.post(
                f"{shop.url}/ucp/catalog/search", json={"query": "*"}, headers=headers, timeout=10
            )
            assert (answer.json()["code"], answer.status_code) == expected, header
            assert answer.json()["continue_url"] == "http://localhost:7071/"
    finally:
        served.close()


def test_an_unknown_catalog_operation_is_a_404_naming_the_three(shop):
    answer = requests.post(f"{shop.url}/ucp/catalog/browse", json={}, headers=AGENT, timeout=10)

    assert answer.status_code == 404 and "/ucp/catalog/search" in answer.json()["content"]


def test_the_docs_snippet_discovers_and_searches_as_the_page_says(shop, tmp_path):
    (block,) = [
        b for b in re.findall(r"^```sh\n(.*?)^```", (ROOT / "docs" / "ucp.md").read_text(), re.M | re.S)
    ]
    code = block.replace("http://localhost:7071", shop.url)

    profile, search = json_answers_of(code, tmp_path)
    assert profile["ucp"]["version"] == VERSION
    assert [p["id"] for p in search["products"]] == list(BUNDLES)


def test_a_method_the_catalog_does_not_serve_is_a_405_in_ucps_shape(shop):
    answer = requests.get(f"{shop.url}/ucp/catalog/search", headers=AGENT, timeout=10)

    assert (answer.status_code, answer.headers["Allow"]) == (405, "POST")
    assert set(answer.json()) == {"code", "content"}
