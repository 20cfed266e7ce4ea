"""Asking the user for a purchase's missing email (MCP 2026-07-28 multi round-trip requests).

A purchase without `email`, whose other arguments are valid, from a client that declared form
elicitation, is answered with an `input_required` result: a form for the email and, when the call
did not name one, the name. The client retries the same call with `inputResponses` and the sealed
`requestState`; the answers are merged into the arguments and the purchase runs as if they had
been sent, under the same idempotency key. Nothing is counted or sent before the answer, and a
declined or dismissed form ends in a refusal that counts and sends nothing either. Clients that
cannot answer get today's validation error.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared import request_state
from shared.catalog import DEFAULT_BUNDLE_ID, find_bundle
from shared.errors import InvalidRequest, NotConfigured, ProtocolError
from shared.hashing import Hasher
from shared.mcp_tools import INVALID_PARAMS
from shared.purchase import OPERATION
from shared.schema import EMAIL_MAX, NAME_MAX, lacks_only_email

INPUT_KEY = "buyer"
ACTIONS = ("accept", "decline", "cancel")


@dataclass(frozen=True)
class Ask:
    """Answer with this `input_required` result."""

    result: dict


@dataclass(frozen=True)
class Refuse:
    """The user would not give the email: refuse the purchase with this error."""

    error: InvalidRequest


def can_answer(capabilities: object) -> bool:
    """Whether the request's client declared form elicitation (an empty `elicitation` means form)."""
    if not isinstance(capabilities, dict) or not isinstance(capabilities.get("elicitation"), dict):
        return False
    modes = capabilities["elicitation"]
    return not modes or isinstance(modes.get("form"), dict)


def resolve(
    request_id: object,
    params: dict,
    arguments: dict,
    capabilities: object,
    header_key: str | None,
    hasher: Hasher,
    now: float,
) -> dict | Ask | Refuse:
    """The arguments to purchase with, or the question to ask, or the refusal of a declined form."""
    if not can_answer(capabilities) or not lacks_only_email(arguments, header_key):
        return arguments
    try:
        return _resolve(request_id, params, arguments, hasher, now)
    except NotConfigured:
        return arguments  # no secret to seal state with: the purchase's own refusal says so


def _resolve(
    request_id: object, params: dict, arguments: dict, hasher: Hasher, now: float
) -> dict | Ask | Refuse:
    claims = {"method": "tools/call", "tool": OPERATION, "arguments": request_state.digest(arguments)}
    state, responses = params.get("requestState"), params.get("inputResponses")
    if state is None:
        return _ask(arguments, hasher, claims, now)  # a first round, or answers nobody asked for
    try:
        request_state.unseal(hasher, state, claims, now)
    except request_state.InvalidState as exc:
        raise ProtocolError(str(exc), status=400, rpc_code=INVALID_PARAMS, request_id=request_id) from None
    if not isinstance(responses, dict):
        return _ask(arguments, hasher, claims, now)
    answer = responses.get(INPUT_KEY)
    if not isinstance(answer, dict) or answer.get("action") not in ACTIONS:
        return _ask(arguments, hasher, claims, now)
    if answer["action"] != "accept":
        verb = "declined to give" if answer["action"] == "decline" else "dismissed the request for"
        return Refuse(
            InvalidRequest(f"the user {verb} an email address; nothing was sent", code="email_declined")
        )
    content = answer.get("content")
    if not isinstance(content, dict) or content.get("email") in (None, ""):
        return _ask(arguments, hasher, claims, now)
    merged = {**arguments, "email": content["email"]}
    if "name" not in arguments and content.get("name") not in (None, ""):
        merged["name"] = content["name"]
    return merged


def _ask(arguments: dict, hasher: Hasher, claims: dict, now: float) -> Ask:
    bundle = find_bundle(arguments.get("bundle_id", DEFAULT_BUNDLE_ID))
    properties: dict = {
        "email": {
            "type": "string",
            "title": "Email address",
            "description": "Where the download link is sent.",
            "format": "email",
            "minLength": 3,
            "maxLength": EMAIL_MAX,
        }
    }
    if "name" not in arguments:
        properties["name"] = {
            "type": "string",
            "title": "Name (optional)",
            "description": "Used in the email's greeting.",
            "maxLength": NAME_MAX,
        }
    message = (
        f'To send the free bundle "{bundle.title}", the store needs the email address to send its '
        "download link to. That address gets one email and is added to the store's contacts."
    )
    form = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {"type": "object", "properties": properties, "required": ["email"]},
        },
    }
    return Ask(
        {
            "resultType": "input_required",
            "inputRequests": {INPUT_KEY: form},
            "requestState": request_state.seal(hasher, claims, now),
        }
    )
