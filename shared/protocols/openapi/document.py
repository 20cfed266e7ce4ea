"""The OpenAPI 3.1 document of the HTTP endpoints, served at `GET /api/openapi.json`.

One source for every shape: a purchase's body is the MCP tool's `INPUT_SCHEMA` and its answer the
receipt (`OUTPUT_SCHEMA`, the tool's `outputSchema`), in shared/protocols/openapi/schemas.py's components.
Each route is one entry of `PATHS` (shared/protocols/openapi/paths.py). The document is built on its first
request, for the store's public base URL, and kept: importing this module builds no document. The
MCP endpoint (`/api/a2a/mcp`) speaks JSON-RPC and is not described here.
"""

from __future__ import annotations

import json
from functools import lru_cache

from shared import __version__
from shared.config.settings import Settings
from shared.protocols.http import JSON_TYPE, Answer, Usage
from shared.protocols.openapi.paths import PATHS
from shared.protocols.openapi.schemas import components

OPENAPI_VERSION = "3.1.0"
USAGE = Usage(("GET", "HEAD"), "GET it for the OpenAPI 3.1 document of the HTTP endpoints")
DESCRIPTION = (
    "Every purchase answer, success or refusal, is one signed receipt (`Receipt`), the same the "
    "MCP tool `purchase_free_bundle` returns at `/api/a2a/mcp` (JSON-RPC, not described here). "
    "Refusals follow one rule: 400 when the request's shape is wrong (not JSON, not an object, a "
    "field missing, unknown, of the wrong type, too long or too short: what the schemas here say, "
    "but for `bundle_id`'s enum, the catalog of the day), 422 when a well-formed request is "
    "refused for a value (an email that is not an address, a bundle the store does not have, a "
    "name refused as a link, an idempotency key used for another request). A body declared as "
    "anything but JSON answers 415. Any method a path does not list answers 405 with an `Allow` "
    "header and a JSON body saying how to call it (`MethodNotAllowed`); HEAD answers as GET "
    "without the body. A path not listed here answers 404 with an `Error` whose `endpoints` "
    "lists every endpoint. Every code, with its status and an example: docs/errors.md."
)


def answer(settings: Settings) -> Answer:
    """The document for this store's public base URL."""
    headers = {"Content-Type": JSON_TYPE, "Cache-Control": "public, max-age=300"}
    return Answer(200, _encoded(settings.public_base_url), headers)


@lru_cache(maxsize=4)
def _encoded(base_url: str) -> bytes:
    return json.dumps(document(base_url), indent=1).encode()


def document(base_url: str) -> dict:
    """The whole document; `base_url` is the one server."""
    paths = {path: build() for path, build in PATHS.items()}
    return {
        "openapi": OPENAPI_VERSION,
        "info": {
            "title": "Storefront",
            "version": __version__,
            "summary": "Free digital bundles for AI agents, each purchase answered with a signed receipt.",
            "description": DESCRIPTION,
        },
        "servers": [{"url": base_url}],
        "paths": paths,
        "components": components(),
    }
