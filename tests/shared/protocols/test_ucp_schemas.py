"""The store's UCP documents against UCP's own JSON Schemas, from the spec repository's snapshot
in ../shared/vendor/ beside the checkout (ucp-spec-fdcf893, 2026-08-22): the business profile, and
each catalog answer, refusal included. Without the snapshot the test is skipped (it is the spec's
text, not a registry's package)."""

from __future__ import annotations

import json
import tarfile

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from shared.config.keys import KeySet
from shared.protocols.ucp import catalog, checkout
from shared.protocols.ucp.profile import business_profile
from shared.purchase.catalog import BUNDLES
from tests.support import ROOT, UNKNOWN_BUNDLE_ID, new_ec_key, private_pem

SPEC = ROOT.parent / "shared" / "vendor" / "ucp-spec-fdcf893.tar.gz"
SCHEMAS = "https://ucp.dev/schemas/"


@pytest.fixture(scope="module")
def registry() -> Registry:
    if not SPEC.exists():
        pytest.skip(f"the UCP spec snapshot is not in {SPEC.parent}")
    found: Registry = Registry()
    with tarfile.open(SPEC) as spec:
        for member in spec.getmembers():
            if (
                member.isfile()
                and member.name.startswith("source/schemas/")
                and member.name.endswith(".json")
            ):
                document = json.loads(spec.extractfile(member).read())  # type: ignore[union-attr]
                found = found.with_resource(document["$id"], Resource.from_contents(document))
    return found


def problems(registry: Registry, document: object, schema: str) -> list[str]:
    validator = Draft202012Validator({"$ref": SCHEMAS + schema}, registry=registry)
    return [f"{list(e.absolute_path)}: {e.message[:160]}" for e in validator.iter_errors(document)]


def test_the_business_profile_is_a_valid_business_profile(registry):
    jwks = KeySet.load(private_pem(new_ec_key())).jwks()
    profile = business_profile("https://shop.example", jwks)

    assert problems(registry, profile, "profile.json#/$defs/business_schema") == []
    assert profile["keys"], "the store's key is published"


ANSWERS = {
    "search": (lambda: catalog.search({"query": "*"}), "shopping/catalog_search.json#/$defs/search_response"),
    "empty search": (
        lambda: catalog.search({"query": "nothing here"}),
        "shopping/catalog_search.json#/$defs/search_response",
    ),
    "lookup": (
        lambda: catalog.lookup({"ids": list(BUNDLES)}),
        "shopping/catalog_lookup.json#/$defs/lookup_response",
    ),
    "product": (
        lambda: catalog.get_product({"id": next(iter(BUNDLES))}),
        "shopping/catalog_lookup.json#/$defs/get_product_response",
    ),
    "unknown product": (
        lambda: catalog.get_product({"id": UNKNOWN_BUNDLE_ID}),
        "common/types/error_response.json",
    ),
    "search without input": (lambda: catalog.search({}), "common/types/error_response.json"),
    "lookup too large": (
        lambda: catalog.lookup({"ids": ["x"] * (catalog.MAX_BATCH + 1)}),
        "common/types/error_response.json",
    ),
}


@pytest.mark.parametrize(("answer", "schema"), ANSWERS.values(), ids=ANSWERS.keys())
def test_each_catalog_answer_is_valid_against_its_schema(registry, answer, schema):
    _, document = answer()

    assert problems(registry, document, schema) == []


def test_the_schemas_do_refuse_a_broken_answer(registry):
    """The check can fail: a product without its variants is refused."""
    _, document = catalog.search({"query": "*"})
    del document["products"][0]["variants"]

    assert problems(registry, document, "shopping/catalog_search.json#/$defs/search_response")


def _session(status: str, buyer: dict, **extra) -> checkout.Session:
    from shared.purchase.catalog import find_bundle

    bundle = find_bundle("agent-starter-kit")
    lines = [checkout.Line(bundle)] if bundle else []
    return checkout.Session("chk_" + "a" * 26, "p", status, lines, buyer, 1.9e9, 1.9e9 + 21600, **extra)


ORDER = {"id": "rcpt_x", "label": "rcpt_x", "permalink_url": "https://shop.example/api/receipts/rcpt_x"}
CHECKOUTS = {
    "incomplete": lambda: checkout.checkout(
        _session("incomplete", {}),
        (checkout.warning("quantity_adjusted", "one", "$.line_items[0].quantity"),),
    ),
    "ready": lambda: checkout.checkout(_session("ready_for_complete", {"email": "ada@example.org"})),
    "completed": lambda: checkout.checkout(_session("completed", {"email": "ada@example.org"}, order=ORDER)),
    "canceled": lambda: checkout.checkout(_session("canceled", {})),
}


@pytest.mark.parametrize("answer", CHECKOUTS.values(), ids=CHECKOUTS.keys())
def test_each_checkout_answer_is_a_valid_checkout(registry, answer):
    assert problems(registry, answer(), "shopping/checkout.json") == []


def test_a_missing_checkout_is_a_valid_error_response(registry):
    assert problems(registry, checkout.not_found(), "common/types/error_response.json") == []
    assert problems(registry, checkout.not_found(), "shopping/checkout.json"), "and no checkout"


def test_a_completed_checkouts_order_is_a_valid_order(registry):
    from shared.protocols.ucp import orders

    order = orders.entity(_session("completed", {"email": "ada@example.org"}, order=ORDER))

    assert problems(registry, order, "shopping/order.json") == []
    assert problems(registry, orders.not_found(), "common/types/error_response.json") == []
