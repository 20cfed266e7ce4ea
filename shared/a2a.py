"""The A2A endpoint (`POST /api/a2a`, JSON-RPC binding) and its agent card
(`GET /.well-known/agent-card.json`): the one purchase flow and receipt, for agents speaking A2A.

- Versions: 1.0 and 0.3 on one URL. `A2A-Version` (header, else query parameter) picks one;
  absent or empty means 0.3. 1.0 methods are PascalCase (`SendMessage`), 0.3 ones slashed
  (`message/send`), and each is answered in its version's shapes (1.0: ProtoJSON, `{"task": ...}`,
  `TASK_STATE_*`; 0.3: `kind` discriminators, `completed`). A method of the other version: -32601
  (method not found in the version asked; -32009 is kept for a version the store does not speak).
- Requests are read and checked whole by shared/a2a_requests.py before anything runs: the
  Content-Type, the envelope, the version, the method and every param the spec bounds (role is
  required, historyLength >= 0, pageSize 1-100, ...), each refusal with the spec's code.
- Input: a message's one JSON object: its data part, or a text part that is only a JSON object
  (bare or alone in a ``` fence), for clients that can send text alone. `{"operation":
  "list_bundles"}` answers a Message holding the catalog (nothing to track). Anything else is the
  purchase: the JSON object the HTTP endpoint takes (`"operation": "purchase_free_bundle"` may be
  added), run with caller channel "a2a". A message of plain text answers a Message that says what
  to send (the data part's shape, the skill ids with an example each, the card's URL), the spec's
  clarification message: nothing is bought and no task is made. An email address is never read
  out of free text, which could name anyone.
- Output: a purchase is a Task, finished when it is answered: completed (fulfilled), rejected (a
  4xx refusal) or failed (a 5xx). Its artifact "receipt" is one data part: the receipt's bytes,
  verbatim. Task id = receipt id, so GetTask reads the receipt on record and needs no task store;
  refusals are never recorded, so only completed tasks are found. No conversation is kept: the
  contextId is the message's, else the task id (GetTask answers the task id); tasks have no history.
- Listing: callers are not authenticated, so no task is visible to any of them and ListTasks
  answers an empty page (`nextPageToken` "", `totalSize` 0) after checking its filters; a task is
  read by its id alone, which only its buyer was given.
- Keys: data `idempotency_key`, else the `Idempotency-Key` header, else the messageId, as
  `a2a-` + 40 hex digits of its SHA-256: valid whatever the messageId (a client may send such a
  key itself; keys are scoped to the buyer's email, so it only ever names its own purchase). A
  resent message replays the receipt (Task metadata `storefront/replayed`).
- Errors: JSON-RPC errors answer HTTP 200, as the SDK servers do (their clients read error codes
  from 2xx answers only); transport refusals keep theirs (403 Origin, 413 size, 415 Content-Type,
  405 method). -32700/-32600 malformed (a request without an id too: A2A has no notifications),
  -32601 unknown method, -32602 bad params (1.0 names the field in a google.rpc.BadRequest),
  -32005 a file part or a media type it does not read, -32001 unknown task, -32002 cancel (every
  task is finished), -32003 push notifications, -32004 streaming, extended card, a message to a
  finished task; -32603 store down.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import replace

from shared import __version__
from shared.a2a_requests import (
    CONTENT_TYPE_NOT_SUPPORTED,
    EXTENDED_CARD_NOT_CONFIGURED_V03,
    INPUT_MODES,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHODS,
    PUSH_NOT_SUPPORTED,
    PUSH_REFUSAL,
    ROLES,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    TEXT_TYPE,
    UNSUPPORTED_OPERATION,
    V03,
    V1,
    VERSION_NOT_SUPPORTED,
    ListQuery,
    Send,
    TaskQuery,
    check_content_type,
    operation_of,
    read_envelope,
    read_params,
    requested_version,
    rpc_error,
)
from shared.catalog import BUNDLES, DEFAULT_BUNDLE_ID, listing
from shared.errors import ProtocolError, StoreUnavailable
from shared.http import (
    JSON_TYPE,
    MAX_BODY_BYTES,
    Answer,
    Request,
    Usage,
    json_answer,
    origin_allowed,
    parse_json,
    purchase_call,
)
from shared.purchase import OPERATION, Outcome, Storefront
from shared.receipts import is_receipt_id
from shared.settings import Settings

CHANNEL = "a2a"
LIST_OPERATION = "list_bundles"
ARTIFACT_ID = "receipt"
RECEIPTS_EXTENSION = "urn:storefront:a2a:signed-receipts:v1"
CARD_PATH = "/.well-known/agent-card.json"
CARD_USAGE = Usage(("GET", "HEAD"), "GET it for the agent card")
ENDPOINT_USAGE = Usage(
    ("POST",),
    "POST one JSON-RPC 2.0 request (SendMessage, GetTask, ListTasks; message/send or tasks/get with "
    "A2A 0.3); the agent card is at /.well-known/agent-card.json",
)
# The reasons 1.0 names its own errors by, sent as google.rpc.ErrorInfo in `error.data`.
REASONS = {
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}
STATES = {
    V1: {
        "fulfilled": "TASK_STATE_COMPLETED",
        "refused": "TASK_STATE_REJECTED",
        "failed": "TASK_STATE_FAILED",
    },
    V03: {"fulfilled": "completed", "refused": "rejected", "failed": "failed"},
}
REFUSALS = {
    "stream": "streaming is not supported (capabilities.streaming is false); SendMessage answers "
    "with the finished task",
    "extended_card": "there is no extended agent card (capabilities.extendedAgentCard is false)",
    "push": PUSH_REFUSAL,
}
PURCHASE_EXAMPLE = {"email": "ada@example.org", "name": "Ada", "bundle_id": DEFAULT_BUNDLE_ID}
LIST_EXAMPLE = {"operation": LIST_OPERATION}


def message_key(message_id: str) -> str:
    """The idempotency key a message stands for when it names none: the same for every resend of
    the message, valid under the key rules whatever the messageId."""
    return "a2a-" + hashlib.sha256(message_id.encode()).hexdigest()[:40]


# --- the agent card ---------------------------------------------------------------------------


def card(settings: Settings) -> dict:
    """The agent card: A2A 1.0 (`supportedInterfaces`), with the 0.3 fields its clients read."""
    base = settings.public_base_url
    endpoint = f"{base}/api/a2a"
    return {
        "name": "Storefront",
        "description": (
            "Gives away free digital bundles to AI agents: emails a bundle's download link to a "
            "buyer and answers with a signed audit receipt. Send one JSON object, as a data part "
            "(application/json) or as a text part that is only the object: the purchase arguments, "
            'or {"operation": "list_bundles"} for the catalog. Plain text is answered with what to send.'
        ),
        "version": __version__,
        "supportedInterfaces": [
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": V1},
            {"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": V03},
        ],
        "url": endpoint,
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3.0",
        "capabilities": {
            "streaming": False,
            "pushNotifications": False,
            "extendedAgentCard": False,
            "extensions": [_receipts_extension(base)],
        },
        "defaultInputModes": INPUT_MODES,
        "defaultOutputModes": [JSON_TYPE, TEXT_TYPE],
        "skills": [_purchase_skill(base), _list_skill()],
    }


def _receipts_extension(base: str) -> dict:
    return {
        "uri": RECEIPTS_EXTENSION,
        "description": (
            f'Every purchase task carries its receipt as the data part of the artifact "{ARTIFACT_ID}": '
            "a detached ES256 JWS over the receipt's canonical JSON, verifiable with the keys at "
            "jwksUrl; a fulfilled receipt is also on record at receiptUrl."
        ),
        "required": False,
        "params": {
            "jwksUrl": f"{base}/.well-known/jwks.json",
            "receiptUrl": f"{base}/api/receipts/{{receipt_id}}",
            "artifactId": ARTIFACT_ID,
        },
    }


def _purchase_skill(base: str) -> dict:
    return {
        "id": OPERATION,
        "name": "Get a free bundle",
        "description": (
            "Emails a free bundle's download link. Send one data part (or a text part that is only "
            "the JSON object) with the purchase arguments (the body POST /api/a2a/purchase takes): "
            "email (required), name, bundle_id (one of "
            f"{', '.join(sorted(BUNDLES))}; default {DEFAULT_BUNDLE_ID}), idempotency_key (8-128 of "
            "A-Z a-z 0-9 . _ -). Without idempotency_key the messageId is the key: resend the same "
            "message to retry, and you get the original receipt, not a second email. Side effects: "
            "the buyer becomes a contact in the store's mailing system and gets one email. The answer "
            "is a finished task, completed, rejected (bad input, a limit, a key in use) or failed (try "
            f'again later), whose artifact "{ARTIFACT_ID}" is the signed receipt; GetTask reads a '
            f"completed one again by its id. Verify receipts with {base}/.well-known/jwks.json."
        ),
        "tags": ["purchase", "free", "bundle", "email", "receipt", "idempotent"],
        "examples": [
            json.dumps(PURCHASE_EXAMPLE),
            json.dumps({**PURCHASE_EXAMPLE, "idempotency_key": "order-2026-0001"}),
        ],
        "inputModes": INPUT_MODES,
        "outputModes": [JSON_TYPE, TEXT_TYPE],
    }


def _list_skill() -> dict:
    return {
        "id": LIST_OPERATION,
        "name": "List the free bundles",
        "description": (
            'Lists the bundles on offer. Send one data part {"operation": "list_bundles"}; the answer '
            'is a message whose data part is {"bundles": [{"id", "title", "description", "price", '
            '"currency"}]}, the document GET /api/bundles serves. Each id is a bundle_id to purchase. '
            "Read-only: no email, no purchase counted."
        ),
        "tags": ["catalog", "bundles", "read-only"],
        "examples": [json.dumps(LIST_EXAMPLE)],
        "inputModes": INPUT_MODES,
        "outputModes": [JSON_TYPE],
    }


def agent_card(req: Request, settings: Settings) -> Answer:
    """The card, cacheable for five minutes, with an ETag (a conditional GET gets 304)."""
    body = json.dumps(card(settings), indent=2).encode()
    etag = f'"{hashlib.sha256(body).hexdigest()[:32]}"'
    headers = {"Cache-Control": "public, max-age=300", "ETag": etag}
    wanted = {tag.strip().removeprefix("W/") for tag in (req.header("if-none-match") or "").split(",")}
    if etag in wanted or "*" in wanted:
        return Answer(304, b"", headers)
    return Answer(200, body, {"Content-Type": JSON_TYPE, **headers})


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
        return _error_answer(exc, request_id, version)


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
        return _list_answer(request_id, params)
    if operation == "get":
        return _task_answer(request_id, version, Outcome(200, _on_record(params, store)), None, wrapped=False)
    if operation == "cancel":
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
    except StoreUnavailable:
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
    return _task_answer(request_id, version, store.purchase(call), send.context_id, wrapped=True)


def _refuse_follow_up(task_id: str, store: Storefront) -> None:
    """Every task is finished when it is answered, so a message to one is refused (or unknown)."""
    if _stored(task_id, store) is None:
        raise rpc_error(TASK_NOT_FOUND, "message.taskId names no task (only completed purchases are kept)")
    raise rpc_error(
        UNSUPPORTED_OPERATION, "the task is finished and takes no more messages; send a new message instead"
    )


# --- answers -------------------------------------------------------------------------------------


def _task_answer(
    request_id: object, version: str, outcome: Outcome, context_id: str | None, *, wrapped: bool
) -> Answer:
    """The receipt as a finished task (`wrapped` in SendMessage's `{"task": ...}` for 1.0). The
    receipt's bytes go into the answer verbatim, in place of a marker no caller can predict."""
    receipt = json.loads(outcome.body)
    marker = f"receipt-{secrets.token_hex(16)}"
    task = _task(version, receipt, context_id, marker, outcome.replayed)
    result = {"task": task} if wrapped and version == V1 else task
    envelope = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode()
    headers = {"Content-Type": JSON_TYPE}
    if outcome.replayed:
        headers["Idempotent-Replayed"] = "true"
    if outcome.retry_after is not None:
        headers["Retry-After"] = str(outcome.retry_after)
    return Answer(200, envelope.replace(json.dumps(marker).encode(), outcome.body, 1), headers)


def _task(version: str, receipt: dict, context_id: str | None, data: object, replayed: bool) -> dict:
    task_id = receipt["receipt_id"]
    context_id = context_id or task_id
    status: dict = {
        "state": STATES[version][receipt["status"]],
        "timestamp": _timestamp(receipt["issued_at"]),
    }
    error = receipt.get("error")
    if error:
        text = error["message"]
        if error.get("retry_after_seconds") is not None:
            # The receipt speaks of keys; an A2A caller's key is its message: a new message would
            # be a new purchase, and a second email.
            text += (
                f" (retry after {error['retry_after_seconds']} seconds by resending the same message, "
                "with the same messageId)"
            )
        parts = [_text_part(version, text)]
        status["message"] = _agent_message(version, f"{task_id}-status", parts, context_id, task_id)
    task: dict = {"kind": "task"} if version == V03 else {}
    task.update(
        id=task_id,
        contextId=context_id,
        status=status,
        artifacts=[
            {
                "artifactId": ARTIFACT_ID,
                "name": "receipt",
                "description": "The signed audit receipt of this purchase.",
                "parts": [_data_part(version, data)],
            }
        ],
    )
    if replayed:
        task["metadata"] = {"storefront/replayed": True}
    return task


def _catalog_answer(request_id: object, version: str, send: Send) -> Answer:
    extra = sorted(k for k in send.data if k != "operation")
    if extra:
        raise rpc_error(
            INVALID_PARAMS, f"list_bundles takes no arguments; got: {', '.join(extra)}", field="message.parts"
        )
    return _message_answer(request_id, version, send, [_data_part(version, listing())])


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
    return _message_answer(request_id, version, send, [_text_part(version, text), _data_part(version, guide)])


def _message_answer(request_id: object, version: str, send: Send, parts: list[dict]) -> Answer:
    """A direct Message (no task): its id derives from the caller's, so a resend gets the same reply."""
    reply_id = "reply-" + hashlib.sha256(send.message_id.encode()).hexdigest()[:32]
    reply = _agent_message(version, reply_id, parts, send.context_id or reply_id, None)
    result = {"message": reply} if version == V1 else reply
    return json_answer(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def _list_answer(request_id: object, query: ListQuery) -> Answer:
    """No task is visible to an unauthenticated caller: one empty, final page."""
    page = {"tasks": [], "nextPageToken": "", "pageSize": query.page_size, "totalSize": 0}
    return json_answer(200, {"jsonrpc": "2.0", "id": request_id, "result": page})


def _agent_message(
    version: str, message_id: str, parts: list[dict], context_id: str, task_id: str | None
) -> dict:
    message: dict = {"kind": "message"} if version == V03 else {}
    message.update(messageId=message_id, role=ROLES[version]["agent"], contextId=context_id)
    if task_id:
        message["taskId"] = task_id
    message["parts"] = parts
    return message


def _text_part(version: str, text: str) -> dict:
    return {"kind": "text", "text": text} if version == V03 else {"text": text}


def _data_part(version: str, data: object) -> dict:
    return {"kind": "data", "data": data} if version == V03 else {"data": data, "mediaType": JSON_TYPE}


def _timestamp(issued_at: str) -> str:
    """The receipt's issue time (2026-11-30T05:54:27Z) with the milliseconds A2A asks for."""
    return issued_at[:-1] + ".000Z" if issued_at.endswith("Z") and "." not in issued_at else issued_at


def _error_answer(exc: ProtocolError, request_id: object, version: str) -> Answer:
    error: dict = {"code": exc.rpc_code, "message": exc.message}
    field = exc.field
    if version == V1 and exc.rpc_code in REASONS:
        error["data"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": REASONS[exc.rpc_code],
                "domain": "a2a-protocol.org",
            }
        ]
    elif version == V1 and field:
        violation = {"field": field, "description": exc.message}
        error["data"] = [
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
        ]
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    request_id = exc.request_id if exc.request_id is not None else request_id
    return json_answer(exc.status, {"jsonrpc": "2.0", "id": request_id, "error": error}, headers)
