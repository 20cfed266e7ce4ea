"""The business profile at /.well-known/ucp (UCP 2026-08-25, overview/index.md "Business Profile"):
the REST service under /ucp, the capabilities the store really has, no payment handlers (every
bundle is free) and the store's ES256 keys, served cacheable as "Hosting" asks."""

from __future__ import annotations

from shared.protocols.ucp.catalog import LOOKUP, SEARCH, VERSION
from shared.protocols.ucp.checkout import CHECKOUT
from shared.protocols.ucp.orders import ORDER

SPEC = f"https://ucp.dev/{VERSION}/specification"
SCHEMAS = f"https://ucp.dev/{VERSION}/schemas"
REST_PATH = "/ucp"
MCP_PATH = "/ucp/mcp"
CAPABILITIES = {
    CHECKOUT: ("shopping/checkout", "shopping/checkout.json"),
    ORDER: ("shopping/order", "shopping/order.json"),
    SEARCH: ("shopping/catalog/search", "shopping/catalog_search.json"),
    LOOKUP: ("shopping/catalog/lookup", "shopping/catalog_lookup.json"),
}
CACHE_CONTROL = "public, max-age=300"  # overview "Hosting": public, max-age of 60 or more


def business_profile(public_base_url: str, jwks: dict) -> dict:
    """The profile: every `dev.ucp.*` entry pinned to VERSION, the keys those of the store's JWKS."""
    service = {
        "version": VERSION,
        "transport": "rest",
        "spec": f"{SPEC}/overview",
        "schema": f"https://ucp.dev/{VERSION}/services/shopping/rest.openapi.json",
        "endpoint": public_base_url.rstrip("/") + REST_PATH,
    }
    capabilities = {
        name: [{"version": VERSION, "spec": f"{SPEC}/{spec}", "schema": f"{SCHEMAS}/{schema}"}]
        for name, (spec, schema) in CAPABILITIES.items()
    }
    keys = [{**key, "alg": "ES256", "use": "sig"} for key in jwks.get("keys", [])]
    mcp = {
        **service,
        "transport": "mcp",
        "schema": f"https://ucp.dev/{VERSION}/services/shopping/mcp.openrpc.json",
        "endpoint": public_base_url.rstrip("/") + MCP_PATH,
    }
    return {
        "ucp": {
            "version": VERSION,
            "services": {"dev.ucp.shopping": [service, mcp]},
            "capabilities": capabilities,
            "payment_handlers": {},
        },
        "keys": keys,
    }
