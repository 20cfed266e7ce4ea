"""The bundles the store gives away. The first one is the store's default free bundle."""

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


def find_bundle(bundle_id: str) -> Bundle | None:
    return BUNDLES.get(bundle_id)
