"""The bundles the store gives away: the one list the purchase tool's `bundle_id` enum, the
`list_bundles` tool and `GET /api/bundles` are all made from. `DEFAULT_BUNDLE_ID` is the one a
purchase without `bundle_id` gets, listed first."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bundle:
    id: str
    title: str
    description: str
    price: str = "0.00"
    currency: str = "USD"


BUNDLES: dict[str, Bundle] = {
    bundle.id: bundle
    for bundle in (
        Bundle(
            id="agent-starter-kit",
            title="Agent Starter Kit",
            description="Prompt templates, tool schemas and checklists for building safe agents.",
        ),
        Bundle(
            id="mcp-field-guide",
            title="MCP Field Guide",
            description="A printable guide to the Model Context Protocol for tool builders.",
        ),
    )
}
DEFAULT_BUNDLE_ID = "agent-starter-kit"

_STRING = {"type": "string"}
LISTING_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "bundles": {
            "type": "array",
            "description": "Every bundle on offer, the default one first.",
            "items": {
                "type": "object",
                "properties": {
                    "id": {**_STRING, "description": "What to pass as bundle_id to purchase_free_bundle."},
                    "title": _STRING,
                    "description": _STRING,
                    "price": {**_STRING, "description": 'A decimal amount; "0.00" for a free bundle.'},
                    "currency": {**_STRING, "description": "ISO 4217 code, such as USD."},
                },
                "required": ["id", "title", "description", "price", "currency"],
            },
        }
    },
    "required": ["bundles"],
}


def find_bundle(bundle_id: str) -> Bundle | None:
    return BUNDLES.get(bundle_id)


def listing() -> dict:
    """The catalog as agents read it (LISTING_SCHEMA): static, so it costs no storage call."""
    return {
        "bundles": [
            {
                "id": b.id,
                "title": b.title,
                "description": b.description,
                "price": b.price,
                "currency": b.currency,
            }
            for b in BUNDLES.values()
        ]
    }
