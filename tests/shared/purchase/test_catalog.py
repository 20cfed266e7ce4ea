"""shared.purchase.catalog: the one list of bundles, and the listing made from it."""

from __future__ import annotations

import json

import jsonschema
import pytest

from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID, LISTING_SCHEMA, Bundle, listing
from shared.purchase.schema import INPUT_SCHEMA
from tests.support import UNKNOWN_BUNDLE_ID, absent_bundle_id, fresh_python


def test_the_listing_names_every_bundle_with_id_title_description_price_and_currency():
    bundles = listing()["bundles"]

    assert [b["id"] for b in bundles] == list(BUNDLES)
    for entry in bundles:
        bundle = BUNDLES[entry["id"]]
        assert entry == {
            "id": bundle.id,
            "title": bundle.title,
            "description": bundle.description,
            "price": "0.00",
            "currency": "USD",
        }


def test_the_default_bundle_is_listed_first():
    assert listing()["bundles"][0]["id"] == DEFAULT_BUNDLE_ID


def test_the_listing_conforms_to_its_schema_which_rejects_an_entry_without_an_id():
    document = listing()
    jsonschema.validate(document, LISTING_SCHEMA)

    del document["bundles"][0]["id"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, LISTING_SCHEMA)


def test_every_listed_id_is_one_the_purchase_tool_accepts_and_no_other():
    assert sorted(b["id"] for b in listing()["bundles"]) == INPUT_SCHEMA["properties"]["bundle_id"]["enum"]


def test_a_bundle_added_to_the_catalog_reaches_the_purchase_enum_the_tool_list_and_the_listing():
    """In a fresh interpreter, so the schemas are built from the changed catalog at import."""
    probe = (
        "import json\n"
        "from shared.purchase import catalog\n"
        "catalog.BUNDLES['prompt-pack'] = catalog.Bundle('prompt-pack', 'Prompt Pack', 'Prompts.')\n"
        "from shared.protocols import api\nfrom shared.protocols.mcp import tools as mcp\n"
        "tools = {t['name']: t for t in mcp.TOOLS}\n"
        "print(json.dumps({\n"
        "    'enum': tools['purchase_free_bundle']['inputSchema']['properties']['bundle_id']['enum'],\n"
        "    'tool': [b['id'] for b in mcp._list_bundles({})['structuredContent']['bundles']],\n"
        "    'http': [b['id'] for b in json.loads(api.bundles().body)['bundles']],\n"
        "}))\n"
    )

    result = fresh_python(probe)

    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert "prompt-pack" in seen["enum"]
    assert seen["tool"] == seen["http"] == [*BUNDLES, "prompt-pack"]


def test_the_suites_unknown_bundle_id_stays_unknown_when_a_bundle_of_that_name_is_added(monkeypatch):
    # Tests of an unknown id take it from absent_bundle_id, so a bundle added to the catalog (as
    # docs/development.md's own bundle adds one) never turns their refusal into a purchase.
    monkeypatch.setitem(BUNDLES, "no-such-bundle", Bundle("no-such-bundle", "Added", "A reader's own."))
    monkeypatch.setitem(BUNDLES, "no-such-bundle-2", Bundle("no-such-bundle-2", "Added", "Another."))

    assert absent_bundle_id("no-such-bundle") == "no-such-bundle-3"
    assert UNKNOWN_BUNDLE_ID == "no-such-bundle", "the shipped catalog has no such bundle"
