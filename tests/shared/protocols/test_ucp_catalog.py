"""shared.protocols.ucp.catalog: the bundles as UCP products, searched, looked up and fetched one
by one as catalog/search.md, lookup.md and rest.md pin it."""

from __future__ import annotations

import pytest

from shared.protocols.ucp import catalog
from shared.purchase.catalog import BUNDLES
from tests.support import UNKNOWN_BUNDLE_ID

IDS = list(BUNDLES)


def test_a_match_all_search_lists_every_bundle_at_price_zero():
    status, answer = catalog.search({"query": "*"})

    assert status == 200
    assert [p["id"] for p in answer["products"]] == IDS
    for product in answer["products"]:
        assert product["variants"][0]["id"] == product["id"], "the variant id is what a checkout names"
        assert product["variants"][0]["price"] == {"amount": 0, "currency": "USD"}
        assert product["price_range"]["min"]["amount"] == product["price_range"]["max"]["amount"] == 0
    assert answer["ucp"]["capabilities"] == {catalog.SEARCH: [{"version": catalog.VERSION}]}


def test_a_search_finds_by_words_and_an_empty_result_has_no_messages():
    assert [p["id"] for p in catalog.search({"query": "field GUIDE"})[1]["products"]] == ["mcp-field-guide"]
    status, answer = catalog.search({"query": "no such bundle anywhere"})
    assert status == 200 and answer["products"] == [] and "messages" not in answer


@pytest.mark.parametrize("body", [{}, {"query": ""}, [], "query", {"query": 3}])
def test_a_search_without_a_query_or_filters_is_refused_with_messages(body):
    status, answer = catalog.search(body)

    assert status == 400
    assert answer["messages"][0]["type"] == "error" and answer["ucp"]["status"] == "error"


def test_search_pages_with_an_opaque_cursor():
    pages = [catalog.search({"query": "*", "pagination": {"limit": 1}})[1]]
    while pages[-1]["pagination"]["has_next_page"] and len(pages) <= len(IDS):
        cursor = pages[-1]["pagination"]["cursor"]
        pages.append(catalog.search({"query": "*", "pagination": {"limit": 1, "cursor": cursor}})[1])

    assert [len(page["products"]) for page in pages] == [1] * len(IDS)
    assert [page["products"][0]["id"] for page in pages] == IDS
    assert pages[-1]["pagination"]["has_next_page"] is False and "cursor" not in pages[-1]["pagination"]


def test_a_lookup_returns_each_bundle_once_and_says_which_id_matched():
    status, answer = catalog.lookup({"ids": [IDS[0], IDS[0], UNKNOWN_BUNDLE_ID, IDS[1]]})

    assert status == 200
    assert [p["id"] for p in answer["products"]] == [IDS[0], IDS[1]]
    assert all(p["variants"][0]["inputs"] == [{"id": p["id"], "match": "exact"}] for p in answer["products"])


def test_a_lookup_past_the_batch_size_is_request_too_large():
    status, answer = catalog.lookup({"ids": [IDS[0]] * (catalog.MAX_BATCH + 1)})

    assert status == 400 and answer["messages"][0]["code"] == "request_too_large"


def test_get_product_finds_a_bundle_and_an_unknown_id_is_a_200_error():
    assert catalog.get_product({"id": IDS[1]})[1]["product"]["id"] == IDS[1]
    status, answer = catalog.get_product({"id": UNKNOWN_BUNDLE_ID})
    assert status == 200 and answer["ucp"]["status"] == "error"
    assert answer["messages"][0]["code"] == "not_found"
