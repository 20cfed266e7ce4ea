"""The A2A endpoint (`POST /api/a2a`, JSON-RPC binding) and its agent card
(`GET /.well-known/agent-card.json`): the one purchase flow and receipt, for agents speaking A2A.

A2A 1.0 and 0.3 on one URL. A message's one JSON object (a data part, or a text part that is only
the object) is the purchase or `list_bundles`; plain text is answered with what to send, and no
email is ever read out of it. A purchase is a task finished when answered, its id the receipt's,
so no task store is kept. This module runs the methods; `protocol`, `requests`, `answers` and
`card` beside it name, read, shape and describe them. docs/clients.md#a2a has the details.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from shared.config.errors import ProtocolError, StorageOutage
from shared.config.settings import Settings
from shared.protocols.a2a.answers import (
    data_part,
    error_answer,
    list_answer,
    message_answer,
    task_answer,
    text_part,
)
from shared.protocols.a2a.card import (
    CARD_PATH,
    LIST_EXAMPLE,
    LIST_OPERATION,
    PURCHASE_EXAMPLE,
)
from shared.protocols.a2a.protocol import (
    EXTENDED_CARD_NOT_CONFIGURED_V03,
    INPUT_MODES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHODS,
    PUSH_NOT_SUPPORTED,
    PUSH_REFUSAL,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    V03,
    rpc_error,
)
from shared.protocols.a2a.requests import (
    ListQuery,
    Send,
    TaskQuery,
    check_content_type,
    operation_of,
    read_envelope,
    read_params,
    requested_version,
)
from shared.protocols.http import (
    MAX_BODY_BYTES,
    Answer,
    Request,
    Usage,
    origin_allowed,
    parse_json,
    purchase_call,
)
from shared.purchase.call import OPERATION, Outcome
from shared.purchase.catalog import BUNDLES, DEFAULT_BUNDLE_ID, listing
from shared.purchase.receipt.document import is_receipt_id
from shared.purchase.storefront import Storefront

CHANNEL = "a2a"
ENDPOINT_USAGE = Usage(
    ("POST",),
    "POST one JSON-RPC 2.0 request (SendMessage, GetTask, ListTasks; message/send or tasks/get with "
    "A2A 0.3); the agent card is at /.well-known/agent-card.json",
)
REFUSALS = {
    "stream": "streaming is not supported (capabilities.streaming is false); SendMessage answers "
    "with the finished task",
    "extended_card": "there is no extended agent card (capabilities.extendedAgentCard is false)",
    "push": PUSH_REFUSAL,
}


def message_key(message_id: str) -> str:
    """The idempotency key a message stands for when it names none: the same for every resend of
    the message, valid under the key rules whatever the messageId."""
    return "a2a-" + hashlib.sha256(message_id.encode()).hexdigest()[:40]


# --- the JSON-RPC endpoint ----------------------------------------------------------------------


def handle(req: Request, store: Storefront, settings: Settings) -> Answer:
    """One JSON-RPC request (POST) in, one JSON-RPC answer out; never an HTTP 500 for the caller's input."""
    request_id, version = None, V03
    try:
        if not origin_allowed(req.header("origin"), settings.allowed_origins):
            raise rpc_error(INVALID_REQUEST, "Origin not allowed", status=403)
        check_content_type(req)
        envelope = read_envelope(req.body)
        request_id = envelope.request_id
        version = requested_version(req)
        operation = operation_of(envelope.method, version)
        params = read_params(operation, version, envelope.params)
        if envelope.notification:
            raise rpc_error(
                INVALID_REQUEST,
                "the request has no id: A2A methods answer, so send an id (a string or a number)",
            )
        return _dispatch(operation, params, request_id, version, req, store, settings)
    except ProtocolError as exc:
        return error_answer(exc, request_id, version)


def _dispatch(
    operation: str,
    params: Send | TaskQuery | ListQuery | None,
    request_id: object,
    version: str,
    req: Request,
    store: Storefront,
    settings: Settings,
) -> Answer:
    if isinstance(params, Send):
        return _send(request_id, version, params, req, store, settings)
    if isinstance(params, ListQuery):
        return list_answer(request_id, params)
    if isinstance(params, TaskQuery) and operation == "get":
        return task_answer(request_id, version, Outcome(200, _on_record(params, store)), None, wrapped=False)
    if isinstance(params, TaskQuery) and operation == "cancel":
        _on_record(params, store)
        raise rpc_error(TASK_NOT_CANCELABLE, "the task is finished (completed) and cannot be canceled")
    code = PUSH_NOT_SUPPORTED if operation == "push" else UNSUPPORTED_OPERATION
    if operation == "extended_card" and version == V03:
        code = EXTENDED_CARD_NOT_CONFIGURED_V03  # 0.3's own code for it
    raise rpc_error(code, REFUSALS[operation])


def sends(body: bytes) -> bool:
    """Whether a request to the endpoint asks to send a message (a purchase, or a catalog
    question): what the telemetry glue counts as a purchase route; reading a task is not."""
    if len(body) > MAX_BODY_BYTES:
        return False
    try:
        message = parse_json(body)  # the handler's own parser: bounded depth, never a crash
    except ValueError:
        return False
    return isinstance(message, dict) and METHODS.get(str(message.get("method")), ("", ""))[1] == "send"


def _on_record(query: TaskQuery, store: Storefront) -> bytes:
    """The receipt of the task the query names, or TaskNotFound."""
    body = _stored(query.task_id, store)
    if body is None:
        raise rpc_error(TASK_NOT_FOUND, "no task with this id (only completed purchases are kept)")
    return body


def _stored(task_id: str, store: Storefront) -> bytes | None:
    if not is_receipt_id(task_id):
        return None
    try:
        return store.stored_receipt(task_id)
    except StorageOutage:
        raise rpc_error(
            INTERNAL_ERROR, "receipt storage is unreachable; retry shortly", retry_after=5
        ) from None


def _send(
    request_id: object, version: str, send: Send, req: Request, store: Storefront, settings: Settings
) -> Answer:
    if send.task_id:
        _refuse_follow_up(send.task_id, store)
    if send.data is None:
        return _guide_answer(request_id, version, send, settings)
    operation = send.data.get("operation", OPERATION)
    if operation == LIST_OPERATION:
        return _catalog_answer(request_id, version, send)
    if operation != OPERATION:
        raise rpc_error(
            INVALID_PARAMS, f"operation must be {OPERATION} or {LIST_OPERATION}", field="message.parts"
        )
    arguments = {k: v for k, v in send.data.items() if k != "operation"}
    call = purchase_call(req, CHANNEL, arguments, settings)
    if call.header_key is None:
        call = replace(call, header_key=message_key(send.message_id))
    return task_answer(request_id, version, store.purchase(call), send.context_id, wrapped=True)


def _refuse_follow_up(task_id: str, store: Storefront) -> None:
    """Every task is finished when it is answered, so a message to one is refused (or unknown)."""
    if _stored(task_id, store) is None:
        raise rpc_error(TASK_NOT_FOUND, "message.taskId names no task (only completed purchases are kept)")
    raise rpc_error(
        UNSUPPORTED_OPERATION, "the task is finished and takes no more messages; send a new message instead"
    )


# --- the store's messages ------------------------------------------------------------------------


def _catalog_answer(request_id: object, version: str, send: Send) -> Answer:
    extra = sorted(k for k in send.data or {} if k != "operation")
    if extra:
        raise rpc_error(
            INVALID_PARAMS, f"list_bundles takes no arguments; got: {', '.join(extra)}", field="message.parts"
        )
    return message_answer(request_id, version, send, [data_part(version, listing())])


def _guide_answer(request_id: object, version: str, send: Send, settings: Settings) -> Answer:
    """What a message of plain text gets: a Message saying exactly what to send, in words and as
    data. Nothing was started, so there is no task to track, and no purchase is guessed from text."""
    card_url = settings.public_base_url + CARD_PATH
    bundles = ", ".join(sorted(BUNDLES))
    text = (
        "Nothing was done: this agent acts on a JSON object only, and never reads an email address "
        "out of free text. Send the message again with one data part (mediaType application/json) "
        "holding the object, or with a text part that is only the object. To get a free bundle "
        f"(skill {OPERATION}): {json.dumps(PURCHASE_EXAMPLE)}; email is required and receives the "
        f"download link, bundle_id is one of {bundles} (default {DEFAULT_BUNDLE_ID}), "
        "idempotency_key (8-128 of A-Z a-z 0-9 . _ -) is optional. For the catalog (skill "
        f"{LIST_OPERATION}): {json.dumps(LIST_EXAMPLE)}. The agent card at {card_url} describes both."
    )
    # The card's own shapes: skill ids and examples as JSON text (so no key here is snake_case).
    guide = {
        "inputModes": INPUT_MODES,
        "skills": [
            {"id": OPERATION, "examples": [json.dumps(PURCHASE_EXAMPLE)]},
            {"id": LIST_OPERATION, "examples": [json.dumps(LIST_EXAMPLE)]},
        ],
        "agentCard": card_url,
    }
    return message_answer(request_id, version, send, [text_part(version, text), data_part(version, guide)])
