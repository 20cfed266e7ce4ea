"""Each HTTP route of the app as an OpenAPI operation, one builder per path in `PATHS`; the
MCP endpoint speaks JSON-RPC and is not described."""

from __future__ import annotations

from collections.abc import Callable

from shared.protocols.http import JSON_TYPE
from shared.protocols.openapi.schemas import (
    error_response,
    get_and_head,
    header,
    html_content,
    json_content,
    receipt_response,
    response,
    retry_after,
)
from shared.purchase.receipt.document import RECEIPT_ID_PATTERN
from shared.purchase.schema import KEY_PATTERN
from shared.seams.ledger import MAX_PAGE_SIZE

# A compact JWS: three base64url parts joined by dots.
TOKEN_PATTERN = "^[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+\\.[A-Za-z0-9_-]+$"
DAY_PATTERN = "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
PURCHASE_EXAMPLE = {"email": "ada@example.org", "name": "Ada Lovelace", "bundle_id": "agent-starter-kit"}
# Web Bot Auth (RFC 9421): optional, and the agent that signs is named in the receipt (docs/agents.md).
SIGNATURE_HEADERS = (
    (
        "Signature-Input",
        "RFC 9421 signature parameters; a member tagged `web-bot-auth` identifies the agent.",
    ),
    ("Signature", "RFC 9421 signature value."),
    ("Signature-Agent", "The agent's origin, where its key directory is served (Web Bot Auth)."),
)


def _purchase() -> dict:
    replayed = header(
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
                },
                *(
                    {
                        "name": name,
                        "in": "header",
                        "required": False,
                        "description": what,
                        "schema": {"type": "string"},
                    }
                    for name, what in SIGNATURE_HEADERS
                ),
            ],
            "requestBody": {
                "required": True,
                "content": {
                    JSON_TYPE: {**json_content("PurchaseRequest")[JSON_TYPE], "example": PURCHASE_EXAMPLE}
                },
            },
            "responses": {
                "200": {
                    **receipt_response(
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
                "400": receipt_response(
                    "Refused for its shape: the body is not JSON or not an object, a field is missing, "
                    "unknown, of the wrong type or too long or short for `PurchaseRequest`, or the "
                    "idempotency key (body or header) is off its pattern."
                ),
                "401": error_response(
                    "A Web Bot Auth signature was sent and cannot be accepted (malformed, expired, "
                    "replayed, a key its directory does not hold, a directory that cannot be fetched or "
                    "is not allowed): code `invalid_signature`, the message says which. Nothing ran and "
                    "no limit was counted.",
                    {
                        "WWW-Authenticate": header(
                            "What would be accepted: a web-bot-auth signature.", {"type": "string"}
                        )
                    },
                ),
                "403": error_response("The request's Origin is not an allowed host."),
                "409": receipt_response(
                    "A request with this idempotency key is still running.", retry_after()
                ),
                "413": receipt_response("The body is larger than 64 KiB."),
                "415": receipt_response(
                    "The body is declared as something other than JSON (a form, text): send it with "
                    "`Content-Type: application/json` (a charset parameter or a `+json` type is fine; "
                    "no Content-Type is read as JSON)."
                ),
                "422": receipt_response(
                    "Refused for a value, the request well-formed: an email that is not an address, a "
                    "name refused as a link or hiding text, a `bundle_id` naming no bundle, or an "
                    "idempotency key already used for another request."
                ),
                "429": receipt_response(
                    "Rate limit, recipient limit or daily cost ceiling reached.", retry_after()
                ),
                "502": receipt_response("The email service refused the request."),
                "503": receipt_response(
                    "Not configured, storage or the email service unavailable; nothing was sent.",
                    retry_after(required=False),
                ),
            },
        }
    }


def _receipt_by_id() -> dict:
    return get_and_head(
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
                "200": response(
                    "The receipt, byte for byte as first returned; HTML with `Accept: text/html`.",
                    {**json_content("Receipt"), **html_content("The receipt's audit and billing page.")},
                ),
                "404": response(
                    "No receipt has this id.", {**json_content("Error"), **html_content("A short page.")}
                ),
                "503": error_response("Receipt storage is unreachable.", retry_after()),
            },
        }
    )


def _receipts_of_day() -> dict:
    return get_and_head(
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
                "200": response(
                    "The page; an HTML table with `Accept: text/html`.",
                    {**json_content("DayListing"), **html_content("The day's receipts as a table.")},
                ),
                "400": error_response(
                    "Malformed: `date` is not a calendar day (YYYY-MM-DD), `page_size` not an integer "
                    f"from 1 to {MAX_PAGE_SIZE}, or `cursor` not one this listing issued."
                ),
                "401": response("On Azure: no valid function key (`code` or `x-functions-key`)."),
                "503": error_response("Ledger storage is unreachable.", retry_after()),
            },
        }
    )


def _download() -> dict:
    both = {**json_content("Error"), **html_content("A short page saying why.")}
    return get_and_head(
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
                "200": response(
                    "The bundle's file.",
                    {
                        "application/zip": {
                            "schema": {"type": "string", "contentMediaType": "application/zip"}
                        }
                    },
                    {"Content-Disposition": header("attachment; filename=...", {"type": "string"})},
                ),
                "401": response(
                    "The token is malformed, not the store's, or expired.",
                    both,
                    {"WWW-Authenticate": header("A Bearer challenge.", {"type": "string"})},
                ),
                "403": response("A genuine token for another audience or bundle.", both),
                "503": response(
                    "The bundle's file or its storage is unavailable, or no key is configured.", both
                ),
            },
        }
    )


def _jwks(operation_id: str) -> Callable[[], dict]:
    def build() -> dict:
        return get_and_head(
            {
                "operationId": operation_id,
                "summary": "The public keys that verify receipts and download tokens (current and retired)",
                "responses": {"200": response("The key set.", json_content("Jwks"))},
            }
        )

    return build


def _health() -> dict:
    return get_and_head(
        {
            "operationId": "getHealth",
            "summary": "Readiness: secrets set and usable, Table and Blob answering, bundle files uploaded",
            "responses": {
                "200": response(
                    "Ready: `ok`, or `degraded` when some bundle files are missing (`missing_bundles`).",
                    json_content("Health"),
                ),
                "503": response("Not ready: `status` says why, `problems` in words.", json_content("Health")),
            },
        }
    )


def _openapi() -> dict:
    return get_and_head(
        {
            "operationId": "getOpenApi",
            "summary": "This document",
            "responses": {"200": response("The OpenAPI 3.1 document.", json_content("OpenApiDocument"))},
        }
    )


def _bundles() -> dict:
    return get_and_head(
        {
            "operationId": "listBundles",
            "summary": "The free bundles on offer, with the bundle_id to buy each",
            "responses": {
                "200": response(
                    "The catalog, as the MCP tool list_bundles returns it.", json_content("Bundles")
                )
            },
        }
    )


def _agent_card() -> dict:
    etag = {
        "ETag": header("The card's version, to send back as If-None-Match.", {"type": "string"}),
        "Last-Modified": header(
            "When this card became the store's current card (an HTTP-date), to send back as "
            "If-Modified-Since; absent when the store could not read it.",
            {"type": "string"},
            required=False,
        ),
    }
    conditions = ("If-None-Match", "If-Modified-Since")
    return get_and_head(
        {
            "operationId": "getAgentCard",
            "summary": "The A2A agent card: the JSON-RPC endpoint at /api/a2a, its skills and extensions",
            "parameters": [
                {"name": name, "in": "header", "required": False, "schema": {"type": "string"}}
                for name in conditions
            ],
            "responses": {
                "200": response(
                    "The agent card (A2A 1.0, with the fields 0.3 clients read).",
                    json_content("AgentCard"),
                    etag,
                ),
                "304": response(
                    "The card is unchanged: the ETag sent names it, or (without If-None-Match) it is "
                    "no newer than If-Modified-Since.",
                    headers=etag,
                ),
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
