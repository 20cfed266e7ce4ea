"""The OpenAPI 3.1 document of the HTTP endpoints, served at `GET /api/openapi.json`.

One source for every shape: a purchase's body is the MCP tool's `INPUT_SCHEMA` and its answer the
receipt (`OUTPUT_SCHEMA`, the tool's `outputSchema`). Each route is one entry of `PATHS`. The
document is built on its first request, for the store's public base URL, and kept: importing this
module builds no document. The MCP endpoint (`/api/a2a/mcp`) speaks JSON-RPC and is not described here.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import lru_cache

from shared import __version__
from shared.catalog import LISTING_SCHEMA
from shared.http import JSON_TYPE, Answer, Usage
from shared.ledger import MAX_PAGE_SIZE
from shared.receipts import OUTPUT_SCHEMA, RECEIPT_ID_PATTERN
from shared.schema import INPUT_SCHEMA, KEY_PATTERN
from shared.settings import Settings

OPENAPI_VERSION = "3.1.0"
USAGE = Usage(("GET", "HEAD"), "GET it for the OpenAPI 3.1 document of the HTTP endpoints")
HTML_TYPE = "text/html"
# A compact JWS: three base64url parts joined by dots.
TOKEN_PATTERN = "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$"
DAY_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
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
PURCHASE_EXAMPLE = {"email": "ada@example.org", "name": "Ada Lovelace", "bundle_id": "agent-starter-kit"}


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
        "components": _components(),
    }


def _ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def _json(schema: str) -> dict:
    return {JSON_TYPE: {"schema": _ref("schemas", schema)}}


def _html(what: str) -> dict:
    return {HTML_TYPE: {"schema": {"type": "string", "description": what}}}


def _response(description: str, content: dict | None = None, headers: dict | None = None) -> dict:
    response: dict = {"description": description}
    if headers:
        response["headers"] = headers
    if content:
        response["content"] = content
    return response


def _header(description: str, schema: dict, *, required: bool = True) -> dict:
    return {"description": description, "required": required, "schema": schema}


def _retry_after(*, required: bool = True) -> dict:
    seconds = {"type": "integer", "minimum": 0}
    return {"Retry-After": _header("Seconds to wait before retrying.", seconds, required=required)}


def _receipt(description: str, headers: dict | None = None) -> dict:
    return _response(description, _json("Receipt"), headers)


def _error(description: str, headers: dict | None = None) -> dict:
    return _response(description, _json("Error"), headers)


def _get(operation: dict) -> dict:
    """A GET operation and its HEAD twin: the same answers, without their bodies."""
    head = copy.deepcopy(operation)
    head["operationId"] = operation["operationId"] + "Head"
    head["summary"] = operation["summary"] + " (headers only)"
    for response in head["responses"].values():
        response.pop("content", None)
        response.pop("links", None)
    return {"get": operation, "head": head}


def _purchase() -> dict:
    replayed = _header(
        "Present on a replay: this is the original answer to the key.",
        {"type": "string", "enum": ["true"]},
        required=False,
    )
    return {
        "post": {
            "operationId": "purchaseFreeBundle",
            "summary": "Get a free bundle: the MCP tool's purchase as plain JSON",
            "description": (
                "Adds the buyer as a Brevo contact (an existing one is left unchanged) and emails a "
                "download link. With an idempotency key (the `Idempotency-Key` header or "
                "`idempotency_key` in the body, which wins) a retry returns the original receipt "
                "byte for byte and does nothing else. A request with an `Origin` header must come "
                "from an allowed host."
            ),
            "parameters": [
                {
                    "name": "Idempotency-Key",
                    "in": "header",
                    "required": False,
                    "description": "Used when the body has no `idempotency_key`.",
                    "schema": {"type": "string", "pattern": KEY_PATTERN},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {JSON_TYPE: {**_json("PurchaseRequest")[JSON_TYPE], "example": PURCHASE_EXAMPLE}},
            },
            "responses": {
                "200": {
                    **_receipt(
                        "Fulfilled: the bundle's link was emailed (or this is a replay of that answer).",
                        {"Idempotent-Replayed": replayed},
                    ),
                    "links": {
                        link: {
                            "operationId": operation,
                            "parameters": {"receipt_id": "$response.body#/receipt_id"},
                        }
                        for link, operation in (
                            ("GetReceipt", "getReceipt"),
                            ("HeadReceipt", "getReceiptHead"),
                        )
                    },
                },
                "400": _receipt(
                    "Refused for its shape: the body is not JSON or not an object, a field is missing, "
                    "unknown, of the wrong type or too long or short for `PurchaseRequest`, or the "
                    "idempotency key (body or header) is off its pattern."
                ),
                "403": _error("The request's Origin is not an allowed host."),
                "409": _receipt("A request with this idempotency key is still running.", _retry_after()),
                "413": _receipt("The body is larger than 64 KiB."),
                "415": _receipt(
                    "The body is declared as something other than JSON (a form, text): send it with "
                    "`Content-Type: application/json` (a charset parameter or a `+json` type is fine; "
                    "no Content-Type is read as JSON)."
                ),
                "422": _receipt(
                    "Refused for a value, the request well-formed: an email that is not an address, a "
                    "name refused as a link or hiding text, a `bundle_id` naming no bundle, or an "
                    "idempotency key already used for another request."
                ),
                "429": _receipt("Rate limit, recipient limit or daily cost ceiling reached.", _retry_after()),
                "502": _receipt("The email service refused the request."),
                "503": _receipt(
                    "Not configured, storage or the email service unavailable; nothing was sent.",
                    _retry_after(required=False),
                ),
            },
        }
    }


def _receipt_by_id() -> dict:
    return _get(
        {
            "operationId": "getReceipt",
            "summary": "One receipt as stored, or its audit and billing page for a browser",
            "parameters": [
                {
                    "name": "receipt_id",
                    "in": "path",
                    "required": True,
                    "schema": {"type": "string", "pattern": RECEIPT_ID_PATTERN},
                }
            ],
            "responses": {
                "200": _response(
                    "The receipt, byte for byte as first returned; HTML with `Accept: text/html`.",
                    {**_json("Receipt"), **_html("The receipt's audit and billing page.")},
                ),
                "404": _response("No receipt has this id.", {**_json("Error"), **_html("A short page.")}),
                "503": _error("Receipt storage is unreachable.", _retry_after()),
            },
        }
    )


def _receipts_of_day() -> dict:
    return _get(
        {
            "operationId": "listReceiptsOfDay",
            "summary": "Finance: one UTC day's receipts with the day's totals, paginated",
            "security": [{"functionKeyQuery": []}, {"functionKeyHeader": []}],
            "parameters": [
                {
                    "name": "date",
                    "in": "query",
                    "description": "The UTC day; today when absent.",
                    "schema": {"type": "string", "format": "date", "pattern": DAY_PATTERN},
                },
                {
                    "name": "page_size",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE, "default": 50},
                },
                {
                    "name": "cursor",
                    "in": "query",
                    "description": "The `next_cursor` of the previous page.",
                    "schema": {"type": "string"},
                },
            ],
            "responses": {
                "200": _response(
                    "The page; an HTML table with `Accept: text/html`.",
                    {**_json("DayListing"), **_html("The day's receipts as a table.")},
                ),
                "400": _error(
                    "Malformed: `date` is not a calendar day (YYYY-MM-DD), `page_size` not an integer "
                    f"from 1 to {MAX_PAGE_SIZE}, or `cursor` not one this listing issued."
                ),
                "401": _response("On Azure: no valid function key (`code` or `x-functions-key`)."),
                "503": _error("Ledger storage is unreachable.", _retry_after()),
            },
        }
    )


def _download() -> dict:
    both = {**_json("Error"), **_html("A short page saying why.")}
    return _get(
        {
            "operationId": "downloadBundle",
            "summary": "Redeem the link from the fulfillment email for the bundle's file",
            "parameters": [
                {
                    "name": "token",
                    "in": "path",
                    "required": True,
                    "description": "The signed download token (a compact ES256 JWS).",
                    "schema": {"type": "string", "pattern": TOKEN_PATTERN},
                }
            ],
            "responses": {
                "200": _response(
                    "The bundle's file.",
                    {
                        "application/zip": {
                            "schema": {"type": "string", "contentMediaType": "application/zip"}
                        }
                    },
                    {"Content-Disposition": _header("attachment; filename=...", {"type": "string"})},
                ),
                "401": _response(
                    "The token is malformed, not the store's, or expired.",
                    both,
                    {"WWW-Authenticate": _header("A Bearer challenge.", {"type": "string"})},
                ),
                "403": _response("A genuine token for another audience or bundle.", both),
                "503": _response(
                    "The bundle's file or its storage is unavailable, or no key is configured.", both
                ),
            },
        }
    )


def _jwks(operation_id: str) -> Callable[[], dict]:
    def build() -> dict:
        return _get(
            {
                "operationId": operation_id,
                "summary": "The public keys that verify receipts and download tokens (current and retired)",
                "responses": {"200": _response("The key set.", _json("Jwks"))},
            }
        )

    return build


def _health() -> dict:
    return _get(
        {
            "operationId": "getHealth",
            "summary": "Readiness: secrets set and usable, Table and Blob answering",
            "responses": {
                "200": _response("Ready.", _json("Health")),
                "503": _response("Not ready: `status` says why, `problems` in words.", _json("Health")),
            },
        }
    )


def _openapi() -> dict:
    return _get(
        {
            "operationId": "getOpenApi",
            "summary": "This document",
            "responses": {"200": _response("The OpenAPI 3.1 document.", _json("OpenApiDocument"))},
        }
    )


def _bundles() -> dict:
    return _get(
        {
            "operationId": "listBundles",
            "summary": "The free bundles on offer, with the bundle_id to buy each",
            "responses": {
                "200": _response("The catalog, as the MCP tool list_bundles returns it.", _json("Bundles"))
            },
        }
    )


def _agent_card() -> dict:
    etag = {"ETag": _header("The card's version, to send back as If-None-Match.", {"type": "string"})}
    return _get(
        {
            "operationId": "getAgentCard",
            "summary": "The A2A agent card: the JSON-RPC endpoint at /api/a2a, its skills and extensions",
            "parameters": [
                {"name": "If-None-Match", "in": "header", "required": False, "schema": {"type": "string"}}
            ],
            "responses": {
                "200": _response(
                    "The agent card (A2A 1.0, with the fields 0.3 clients read).", _json("AgentCard"), etag
                ),
                "304": _response("The card is unchanged since the ETag sent.", headers=etag),
            },
        }
    )


PATHS: dict[str, Callable[[], dict]] = {
    "/api/a2a/purchase": _purchase,
    "/api/receipts/{receipt_id}": _receipt_by_id,
    "/api/receipts": _receipts_of_day,
    "/api/download/{token}": _download,
    "/api/.well-known/jwks.json": _jwks("getJwks"),
    "/.well-known/jwks.json": _jwks("getJwksAtRoot"),
    "/.well-known/agent-card.json": _agent_card,
    "/api/bundles": _bundles,
    "/api/health": _health,
    "/api/openapi.json": _openapi,
}


def _string(description: str | None = None) -> dict:
    return {"type": "string", **({"description": description} if description else {})}


def _object(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


_ERROR = _object(
    {
        "error": _object(
            {
                "code": _string("A stable, machine-readable code such as `not_found`."),
                "message": _string("What went wrong, in words."),
                "allow": {"type": "array", "items": {"type": "string"}},
                "endpoints": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "On a 404 for an unknown path: every endpoint, as `METHOD /path`.",
                },
                "openapi": _string("On a 404 for an unknown path: where this document is."),
                "docs": _string(),
            },
            ["code", "message"],
        )
    }
)
_LEDGER_ENTRY = _object(
    {
        name: _string()
        for name in (
            "receipt_id",
            "issued_at",
            "bundle_id",
            "bundle_title",
            "amount",
            "currency",
            "cost_estimate",
            "cost_currency",
        )
    }
)
_DAY_LISTING = _object(
    {
        "date": _string(),
        "count": {"type": "integer", "minimum": 0},
        "totals": {
            "type": "object",
            "description": "Per currency: the day's amount and cost estimate.",
            "additionalProperties": _object({"amount": _string(), "cost_estimate": _string()}),
        },
        "receipts": {"type": "array", "items": _ref("schemas", "LedgerEntry")},
        "next_cursor": {"anyOf": [_string(), {"type": "null"}]},
    }
)
_JWKS = _object(
    {
        "keys": {
            "type": "array",
            "items": _object(
                {name: _string() for name in ("kty", "crv", "x", "y", "kid", "alg", "use")},
                ["kty", "kid"],
            ),
        }
    }
)
_AGENT_CARD = _object(
    {
        "name": _string(),
        "description": _string(),
        "version": _string(),
        "supportedInterfaces": {
            "type": "array",
            "items": _object({"url": _string(), "protocolBinding": _string(), "protocolVersion": _string()}),
        },
        "capabilities": {"type": "object"},
        "defaultInputModes": {"type": "array", "items": _string()},
        "defaultOutputModes": {"type": "array", "items": _string()},
        "skills": {"type": "array", "items": _object({"id": _string(), "name": _string()}, ["id", "name"])},
    }
)
_HEALTH = _object(
    {
        "status": {"type": "string", "enum": ["ok", "unconfigured", "unavailable"]},
        "version": _string(),
        "missing_settings": {"type": "array", "items": _string()},
        "problems": {"type": "array", "items": _string()},
    }
)


def _components() -> dict:
    """A copy, so no caller of the document can change the schemas the MCP tool publishes."""
    return copy.deepcopy(
        {
            "schemas": {
                "PurchaseRequest": INPUT_SCHEMA,
                "Receipt": OUTPUT_SCHEMA,
                "Error": _ERROR,
                "LedgerEntry": _LEDGER_ENTRY,
                "DayListing": _DAY_LISTING,
                "Jwks": _JWKS,
                "Health": _HEALTH,
                "Bundles": LISTING_SCHEMA,
                "AgentCard": _AGENT_CARD,
                "OpenApiDocument": _object(
                    {"openapi": _string(), "info": {"type": "object"}, "paths": {"type": "object"}}
                ),
            },
            "responses": {
                "MethodNotAllowed": _error(
                    "Any method the path does not list: how to call it instead.",
                    {"Allow": _header("The methods the path serves.", {"type": "string"})},
                )
            },
            "securitySchemes": {
                "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
                "functionKeyHeader": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
            },
        }
    )
