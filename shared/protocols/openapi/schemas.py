"""The OpenAPI document's building blocks (references, responses, headers, a GET with its HEAD
twin) and its shared components: the schemas of errors, the ledger, keys, the agent card and
health, and the one source for the purchase's shapes (the MCP tool's `INPUT_SCHEMA` and
`OUTPUT_SCHEMA`)."""

from __future__ import annotations

import copy

from shared.protocols.http import JSON_TYPE
from shared.purchase.catalog import LISTING_SCHEMA
from shared.purchase.receipt.document import OUTPUT_SCHEMA
from shared.purchase.schema import INPUT_SCHEMA

HTML_TYPE = "text/html"


def ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def json_content(schema: str) -> dict:
    return {JSON_TYPE: {"schema": ref("schemas", schema)}}


def html_content(what: str) -> dict:
    return {HTML_TYPE: {"schema": {"type": "string", "description": what}}}


def response(description: str, content: dict | None = None, headers: dict | None = None) -> dict:
    response: dict = {"description": description}
    if headers:
        response["headers"] = headers
    if content:
        response["content"] = content
    return response


def header(description: str, schema: dict, *, required: bool = True) -> dict:
    return {"description": description, "required": required, "schema": schema}


def retry_after(*, required: bool = True) -> dict:
    seconds = {"type": "integer", "minimum": 0}
    return {"Retry-After": header("Seconds to wait before retrying.", seconds, required=required)}


def receipt_response(description: str, headers: dict | None = None) -> dict:
    return response(description, json_content("Receipt"), headers)


def error_response(description: str, headers: dict | None = None) -> dict:
    return response(description, json_content("Error"), headers)


def get_and_head(operation: dict) -> dict:
    """A GET operation and its HEAD twin: the same answers, without their bodies."""
    head = copy.deepcopy(operation)
    head["operationId"] = operation["operationId"] + "Head"
    head["summary"] = operation["summary"] + " (headers only)"
    for answer in head["responses"].values():
        answer.pop("content", None)
        answer.pop("links", None)
    return {"get": operation, "head": head}


def string(description: str | None = None) -> dict:
    return {"type": "string", **({"description": description} if description else {})}


def object_schema(properties: dict, required: list[str] | None = None) -> dict:
    return {"type": "object", "properties": properties, "required": required or list(properties)}


_ERROR = object_schema(
    {
        "error": object_schema(
            {
                "code": string("A stable, machine-readable code such as `not_found`."),
                "message": string("What went wrong, in words."),
                "allow": {"type": "array", "items": {"type": "string"}},
                "endpoints": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "On a 404 for an unknown path: every endpoint, as `METHOD /path`.",
                },
                "openapi": string("On a 404 for an unknown path: where this document is."),
                "docs": string(),
            },
            ["code", "message"],
        )
    }
)
_LEDGER_ENTRY = object_schema(
    {
        name: string()
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
_DAY_LISTING = object_schema(
    {
        "date": string(),
        "count": {"type": "integer", "minimum": 0},
        "totals": {
            "type": "object",
            "description": "Per currency: the day's amount and cost estimate.",
            "additionalProperties": object_schema({"amount": string(), "cost_estimate": string()}),
        },
        "receipts": {"type": "array", "items": ref("schemas", "LedgerEntry")},
        "next_cursor": {"anyOf": [string(), {"type": "null"}]},
    }
)
_JWKS = object_schema(
    {
        "keys": {
            "type": "array",
            "items": object_schema(
                {name: string() for name in ("kty", "crv", "x", "y", "kid", "alg", "use")},
                ["kty", "kid"],
            ),
        }
    }
)
_AGENT_CARD = object_schema(
    {
        "name": string(),
        "description": string(),
        "version": string(),
        "supportedInterfaces": {
            "type": "array",
            "items": object_schema(
                {"url": string(), "protocolBinding": string(), "protocolVersion": string()}
            ),
        },
        "capabilities": {"type": "object"},
        "defaultInputModes": {"type": "array", "items": string()},
        "defaultOutputModes": {"type": "array", "items": string()},
        "skills": {
            "type": "array",
            "items": object_schema({"id": string(), "name": string()}, ["id", "name"]),
        },
    }
)
_HEALTH = object_schema(
    {
        "status": {"type": "string", "enum": ["ok", "degraded", "unconfigured", "unavailable"]},
        "version": string(),
        "missing_settings": {"type": "array", "items": string()},
        "missing_bundles": {
            "description": "Bundles whose file is not uploaded: their download links answer 503 "
            "until it is, while the other bundles work (`degraded`, 200).",
            "type": "array",
            "items": string(),
        },
        "problems": {"type": "array", "items": string()},
        "contacts": {
            "description": "The contact backlog: buyers waiting to become Brevo contacts, the oldest's "
            "age in seconds (null when none is visible), and messages in the poison queue; null when "
            "the queue could not be read. It never holds an address.",
            "anyOf": [
                object_schema(
                    {
                        "waiting": {"type": "integer", "minimum": 0},
                        "oldest_seconds": {"anyOf": [{"type": "number", "minimum": 0}, {"type": "null"}]},
                        "poisoned": {"type": "integer", "minimum": 0},
                    }
                ),
                {"type": "null"},
            ],
        },
    }
)


def components() -> dict:
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
                "OpenApiDocument": object_schema(
                    {"openapi": string(), "info": {"type": "object"}, "paths": {"type": "object"}}
                ),
            },
            "responses": {
                "MethodNotAllowed": error_response(
                    "Any method the path does not list: how to call it instead.",
                    {"Allow": header("The methods the path serves.", {"type": "string"})},
                )
            },
            "securitySchemes": {
                "functionKeyQuery": {"type": "apiKey", "in": "query", "name": "code"},
                "functionKeyHeader": {"type": "apiKey", "in": "header", "name": "x-functions-key"},
            },
        }
    )
