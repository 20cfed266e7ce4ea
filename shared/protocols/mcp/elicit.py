"""Asking the user for a purchase's missing email (MCP 2026-07-28 multi round-trip requests).

A purchase without `email`, whose other arguments are valid, from a client that declared form
elicitation, is answered with an `input_required` result: a form for the email and, when the call
did not name one, the name. The client retries the same call with `inputResponses` and the sealed
`requestState`, and the purchase runs as if the answers had been sent, under the same idempotency
key. Nothing is counted or sent before a valid answer; other clients get the validation error.
docs/clients.md#mcp-protocol has the rest: answers refused, forms declined, states expired.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.config.errors import InvalidRequest, NotConfigured, ProtocolError, Unprocessable
from shared.config.hashing import Hasher
from shared.protocols.mcp import request_state
from shared.protocols.mcp.tools import INVALID_PARAMS
from shared.purchase.call import OPERATION
from shared.purchase.catalog import DEFAULT_BUNDLE_ID, find_bundle
from shared.purchase.schema import EMAIL_MAX, EMAIL_MIN, NAME_MAX, lacks_only_email, validate_arguments

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
    ttl: int,
) -> dict | Ask | Refuse:
    """The arguments to purchase with, or the question to ask, or the refusal of a declined form.
    `ttl` is how long a question's state stays good: as long as the key's claim is remembered, so
    a retry that replays a purchase is never refused for an old state."""
    if not can_answer(capabilities) or not lacks_only_email(arguments, header_key):
        return arguments
    claims = {"method": "tools/call", "tool": OPERATION, "arguments": request_state.digest(arguments)}
    question = _Question(arguments, hasher, claims, now, ttl)
    try:
        return _resolve(request_id, params, question)
    except NotConfigured:
        return arguments  # no secret to seal state with: the purchase's own refusal says so


@dataclass(frozen=True)
class _Question:
    arguments: dict
    hasher: Hasher
    claims: dict
    now: float
    ttl: int

    def ask(self, problem: str | None = None) -> Ask:
        return _ask(self, problem)


def _resolve(request_id: object, params: dict, question: _Question) -> dict | Ask | Refuse:
    state, responses = params.get("requestState"), params.get("inputResponses")
    if state is None:
        return question.ask()  # a first round, or answers nobody asked for
    try:
        request_state.unseal(question.hasher, state, question.claims, question.now)
    except request_state.Expired:
        return question.ask("The earlier question expired.")
    except request_state.InvalidState as exc:
        raise ProtocolError(str(exc), status=400, rpc_code=INVALID_PARAMS, request_id=request_id) from None
    answer = responses.get(INPUT_KEY) if isinstance(responses, dict) else None
    if not isinstance(answer, dict) or answer.get("action") not in ACTIONS:
        return question.ask()
    if answer["action"] != "accept":
        verb = "declined to give" if answer["action"] == "decline" else "dismissed the request for"
        return Refuse(
            InvalidRequest(f"the user {verb} an email address; nothing was sent", code="email_declined")
        )
    content = answer.get("content")
    if not isinstance(content, dict) or content.get("email") in (None, ""):
        return question.ask()
    merged = {**question.arguments, "email": content["email"]}
    if "name" not in question.arguments and content.get("name") not in (None, ""):
        merged["name"] = content["name"]
    try:
        validate_arguments(merged)
    except (InvalidRequest, Unprocessable) as exc:
        return question.ask(f"That answer was not accepted: {exc.message}.")  # asked again, not counted
    return merged


def _ask(question: _Question, problem: str | None) -> Ask:
    arguments = question.arguments
    bundle = find_bundle(arguments.get("bundle_id", DEFAULT_BUNDLE_ID))
    properties: dict = {
        "email": {
            "type": "string",
            "title": "Email address",
            "description": "Where the download link is sent.",
            "format": "email",
            "minLength": EMAIL_MIN,
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
    named = f' "{bundle.title}"' if bundle else ""  # the arguments were checked: it is known
    message = (
        f"To send the free bundle{named}, the store needs the email address to send its "
        "download link to. That address gets one email and is added to the store's contacts."
    )
    if problem:
        message = f"{problem} {message}"
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
            "requestState": request_state.seal(question.hasher, question.claims, question.now, question.ttl),
        }
    )
