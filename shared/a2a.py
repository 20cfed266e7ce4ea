"""The A2A endpoint (`POST /api/a2a`, JSON-RPC binding) and its agent card
(`GET /.well-known/agent-card.json`): the one purchase flow and receipt, for agents speaking A2A.

- Versions: 1.0 and 0.3 on one URL. `A2A-Version` (header, else query parameter) picks one;
  absent or empty means 0.3. 1.0 methods are PascalCase (`SendMessage`), 0.3 ones slashed
  (`message/send`), and each is answered in its version's shapes (1.0: ProtoJSON, `{"task": ...}`,
  `TASK_STATE_*`; 0.3: `kind` discriminators, `completed`). A method of the other version: -32601
  (method not found in the version asked; -32009 is kept for a version the store does not speak).
- Input: a message with one data part. `{"operation": "list_bundles"}` answers a Message holding
  the catalog (nothing to track). Anything else is the purchase: the JSON object the HTTP endpoint
  takes (`"operation": "purchase_free_bundle"` may be added), run with caller channel "a2a".
- Output: a purchase is a Task, finished when it is answered: completed (fulfilled), rejected (a
  4xx refusal) or failed (a 5xx). Its artifact "receipt" is one data part: the receipt's bytes,
  verbatim. Task id = receipt id, so GetTask reads the receipt on record and needs no task store;
  refusals are never recorded, so only completed tasks are found. No conversation is kept: the
  contextId is the message's, else the task id (GetTask answers the task id).
- Keys: data `idempotency_key`, else the `Idempotency-Key` header, else the messageId, as
  `a2a-` + 40 hex digits of its SHA-256: valid whatever the messageId (a client may send such a
  key itself; keys are scoped to the buyer's email, so it only ever names its own purchase). A
  resent message replays the receipt (Task metadata `storefront/replayed`).
- Errors: JSON-RPC errors answer HTTP 200, as the SDK servers do (their clients read error codes
  from 2xx answers only); transport refusals keep theirs (403 Origin, 413 size, 405 method).
  -32700/-32600 malformed, -32601 unknown method, -32602 bad params, -32005 no data part,
  -32001 unknown task, -32002 cancel (every task is finished), -32003 push notifications,
  -32004 streaming, ListTasks, extended card, a message to a finished task; -32603 store down.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import replace

from shared import __version__
from shared.api import (
    JSON_TYPE,
    MAX_BODY_BYTES,
    Answer,
    JSONTooDeep,
    Request,
    Usage,
    json_answer,
    origin_allowed,
    parse_json,
    purchase_call,
)
from shared.catalog import BUNDLES, DEFAULT_BUNDLE_ID, listing
from shared.errors import ProtocolError, StoreUnavailable
from shared.purchase import OPERATION, Outcome, Storefront
from shared.receipts import is_receipt_id
from shared.settings import Settings

V1, V03 = "1.0", "0.3"
CHANNEL = "a2a"
LIST_OPERATION = "list_bundles"
ARTIFACT_ID = "receipt"
RECEIPTS_EXTENSION = "urn:storefront:a2a:signed-receipts:v1"
CARD_USAGE = Usage(("GET", "HEAD"), "GET it for the agent card")
ENDPOINT_USAGE = Usage(
    ("POST",),
    "POST one JSON-RPC 2.0 request (SendMessage or GetTask; message/send or tasks/get with A2A 0.3); "
    "the agent card is at /.well-known/agent-card.json",
)

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
)
TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED, UNSUPPORTED_OPERATION = (
    -32001,
    -32002,
    -32003,
    -32004,
)
CONTENT_TYPE_NOT_SUPPORTED, VERSION_NOT_SUPPORTED = -32005, -32009
EXTENDED_CARD_NOT_CONFIGURED_V03 = -32007
# The reasons 1.0 names its own errors by, sent as google.rpc.ErrorInfo in `error.data`.
REASONS = {
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
}

_PUSH_1 = ("Create", "Get", "List", "Delete")
METHODS: dict[str, tuple[str, str]] = {
    "SendMessage": (V1, "send"),
    "GetTask": (V1, "get"),
    "CancelTask": (V1, "cancel"),
    "SendStreamingMessage": (V1, "stream"),
    "SubscribeToTask": (V1, "stream"),
    "ListTasks": (V1, "list"),
    "GetExtendedAgentCard": (V1, "extended_card"),
    **{f"{verb}TaskPushNotificationConfig{'s' if verb == 'List' else ''}": (V1, "push") for verb in _PUSH_1},
    "message/send": (V03, "send"),
    "tasks/get": (V03, "get"),
    "tasks/cancel": (V03, "cancel"),
    "message/stream": (V03, "stream"),
    "tasks/resubscribe": (V03, "stream"),
    "agent/getAuthenticatedExtendedCard": (V03, "extended_card"),
    **{f"tasks/pushNotificationConfig/{verb}": (V03, "push") for verb in ("set", "get", "list", "delete")},
}
STATES = {
    V1: {
        "fulfilled": "TASK_STATE_COMPLETED",
        "refused": "TASK_STATE_REJECTED",
        "failed": "TASK_STATE_FAILED",
    },
    V03: {"fulfilled": "completed", "refused": "rejected", "failed": "failed"},
}
ROLES = {V1: {"user": "ROLE_USER", "agent": "ROLE_AGENT"}, V03: {"user": "user", "agent": "agent"}}
REFUSALS = {
    "stream": "streaming is not supported (capabilities.streaming is false); SendMessage answers "
    "with the finished task",
    "list": "tasks are not listed: callers are not authenticated, so a listing could not be kept to "
    "your own tasks; GetTask reads one by its id",
    "extended_card": "there is no extended agent card (capabilities.extendedAgentCard is false)",
    "push": "push notifications are not supported (capabilities.pushNotifications is false): every "
    "task is finished when SendMessage answers",
}


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
            "buyer and answers with a signed audit receipt. Send one data part (application/json): "
            'the purchase arguments, or {"operation": "list_bundles"} for the catalog.'
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
        "defaultInputModes": [JSON_TYPE],
        "defaultOutputModes": [JSON_TYPE],
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
    example = {"email": "ada@example.org", "name": "Ada", "bundle_id": DEFAULT_BUNDLE_ID}
    return {
        "id": OPERATION,
        "name": "Get a free bundle",
        "description": (
            "Emails a free bundle's download link. Send one data part with the purchase arguments "
            "(the body POST /api/a2a/purchase takes): email (required), name, bundle_id (one of "
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
            json.dumps(example),
            json.dumps({**example, "idempotency_key": "order-2026-0001"}),
        ],
        "inputModes": [JSON_TYPE],
        "outputModes": [JSON_TYPE],
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
        "examples": [json.dumps({"operation": LIST_OPERATION})],
        "inputModes": [JSON_TYPE],
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


def _rpc_error(
    code: int, message: str, *, status: int = 200, retry_after: int | None = None
) -> ProtocolError:
    error = ProtocolError(message[:300], status=status, rpc_code=code)
    error.retry_after = retry_after
    return error


def handle(req: Request, store: Storefront, settings: Settings) -> Answer:
    """One JSON-RPC request (POST) in, one JSON-RPC answer out; never an HTTP 500 for the caller's input."""
    request_id, version = None, V03
    try:
        if not origin_allowed(req.header("origin"), settings.allowed_origins):
            raise _rpc_error(INVALID_REQUEST, "Origin not allowed", status=403)
        if len(req.body) > MAX_BODY_BYTES:
            raise _rpc_error(INVALID_REQUEST, f"request exceeds {MAX_BODY_BYTES} bytes", status=413)
        message = _parse(req.body)
        request_id = message["id"]
        version = requested_version(req)
        return _dispatch(message, version, req, store)
    except ProtocolError as exc:
        return _error_answer(exc, request_id, version)


def requested_version(req: Request) -> str:
    """1.0 or 0.3 from A2A-Version (patch levels ignored; absent or empty is 0.3), else -32009."""
    asked = (req.header("a2a-version") or req.params.get("A2A-Version") or "").strip()
    if not asked:
        return V03
    parts = asked.split(".")
    if len(parts) in (2, 3) and ".".join(parts[:2]) in (V1, V03) and all(p.isdigit() for p in parts):
        return ".".join(parts[:2])
    raise _rpc_error(VERSION_NOT_SUPPORTED, f"A2A-Version {asked[:20]!r} is not supported; use 1.0 or 0.3")


def _parse(body: bytes) -> dict:
    try:
        message = parse_json(body)
    except JSONTooDeep as exc:
        raise _rpc_error(PARSE_ERROR, f"Parse error: {exc}") from None
    except ValueError:
        raise _rpc_error(PARSE_ERROR, "Parse error: body is not JSON") from None
    if isinstance(message, list):
        raise _rpc_error(INVALID_REQUEST, "batches are not supported: send one JSON-RPC request per POST")
    if not isinstance(message, dict):
        raise _rpc_error(INVALID_REQUEST, "not a JSON-RPC 2.0 request object")
    request_id = message.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, (str, int)):
        raise _rpc_error(INVALID_REQUEST, "id must be a string or an integer (A2A has no notifications)")
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        error = _rpc_error(
            INVALID_REQUEST, 'not a JSON-RPC 2.0 request: "jsonrpc" must be "2.0", "method" a string'
        )
        error.request_id = request_id
        raise error
    return message


def _dispatch(message: dict, version: str, req: Request, store: Storefront) -> Answer:
    method = message["method"]
    if method not in METHODS:
        raise _rpc_error(METHOD_NOT_FOUND, f"method not found: {method}")
    family, operation = METHODS[method]
    if family != version:
        raise _rpc_error(
            METHOD_NOT_FOUND,
            f"{method} is an A2A {family} method, but this request is A2A {version} (A2A-Version "
            f"header; absent means 0.3). Send A2A-Version: {family}, or use the {version} method.",
        )
    params = message.get("params", {})
    if not isinstance(params, dict):
        raise _rpc_error(INVALID_PARAMS, "params must be an object")
    if operation == "send":
        return _send(message["id"], version, params, req, store)
    if operation == "get":
        return _task_answer(
            message["id"], version, Outcome(200, _on_record(params, store)), None, wrapped=False
        )
    if operation == "cancel":
        _on_record(params, store)
        raise _rpc_error(TASK_NOT_CANCELABLE, "the task is finished (completed) and cannot be canceled")
    code = PUSH_NOT_SUPPORTED if operation == "push" else UNSUPPORTED_OPERATION
    if operation == "extended_card" and version == V03:
        code = EXTENDED_CARD_NOT_CONFIGURED_V03  # 0.3's own code for it
    raise _rpc_error(code, REFUSALS[operation])


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


def _on_record(params: dict, store: Storefront) -> bytes:
    """The receipt of the task `params.id` names, or TaskNotFound."""
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise _rpc_error(INVALID_PARAMS, "params.id must be the task's id")
    body = _stored(task_id, store)
    if body is None:
        raise _rpc_error(TASK_NOT_FOUND, "no task with this id (only completed purchases are kept)")
    return body


def _stored(task_id: str, store: Storefront) -> bytes | None:
    if not is_receipt_id(task_id):
        return None
    try:
        return store.stored_receipt(task_id)
    except StoreUnavailable:
        raise _rpc_error(
            INTERNAL_ERROR, "receipt storage is unreachable; retry shortly", retry_after=5
        ) from None


def _send(request_id: object, version: str, params: dict, req: Request, store: Storefront) -> Answer:
    message = params.get("message")
    if not isinstance(message, dict):
        raise _rpc_error(INVALID_PARAMS, "params.message must be a Message object")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise _rpc_error(INVALID_PARAMS, "message.messageId must be a non-empty string")
    if message.get("role") not in (None, ROLES[version]["user"]):
        raise _rpc_error(INVALID_PARAMS, f"message.role must be {ROLES[version]['user']}")
    _refuse_push_config(params.get("configuration"))
    if message.get("taskId"):
        _refuse_follow_up(message["taskId"], store)
    data = _data(message)
    context_id = message.get("contextId") if isinstance(message.get("contextId"), str) else None
    operation = data.get("operation", OPERATION)
    if operation == LIST_OPERATION:
        return _catalog_answer(request_id, version, data, message_id, context_id)
    if operation != OPERATION:
        raise _rpc_error(INVALID_PARAMS, f"operation must be {OPERATION} or {LIST_OPERATION}")
    arguments = {k: v for k, v in data.items() if k != "operation"}
    call = purchase_call(req, CHANNEL, arguments)
    if call.header_key is None:
        call = replace(call, header_key=message_key(message_id))
    return _task_answer(request_id, version, store.purchase(call), context_id, wrapped=True)


def _refuse_push_config(configuration: object) -> None:
    if isinstance(configuration, dict) and (
        configuration.get("taskPushNotificationConfig") or configuration.get("pushNotificationConfig")
    ):
        raise _rpc_error(PUSH_NOT_SUPPORTED, REFUSALS["push"])


def _refuse_follow_up(task_id: object, store: Storefront) -> None:
    """Every task is finished when it is answered, so a message to one is refused (or unknown)."""
    if not isinstance(task_id, str) or _stored(task_id, store) is None:
        raise _rpc_error(TASK_NOT_FOUND, "message.taskId names no task (only completed purchases are kept)")
    raise _rpc_error(
        UNSUPPORTED_OPERATION, "the task is finished and takes no more messages; send a new message instead"
    )


def _data(message: dict) -> dict:
    """The message's one data part, an object."""
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        raise _rpc_error(INVALID_PARAMS, "message.parts must be a non-empty list of parts")
    found = [p for p in parts if "data" in p]
    if not found:
        raise _rpc_error(
            CONTENT_TYPE_NOT_SUPPORTED,
            "send one data part (application/json): the purchase arguments, such as "
            '{"email": "ada@example.org"}, or {"operation": "list_bundles"}',
        )
    if len(found) > 1:
        raise _rpc_error(INVALID_PARAMS, "send exactly one data part")
    if found[0].get("mediaType", JSON_TYPE) != JSON_TYPE:
        raise _rpc_error(CONTENT_TYPE_NOT_SUPPORTED, f"the data part's mediaType must be {JSON_TYPE}")
    data = found[0]["data"]
    if not isinstance(data, dict):
        raise _rpc_error(INVALID_PARAMS, "the data part must hold a JSON object")
    return data


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
        parts = [{"kind": "text", "text": text} if version == V03 else {"text": text}]
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


def _catalog_answer(
    request_id: object, version: str, data: dict, message_id: str, context_id: str | None
) -> Answer:
    extra = sorted(k for k in data if k != "operation")
    if extra:
        raise _rpc_error(INVALID_PARAMS, f"list_bundles takes no arguments; got: {', '.join(extra)}")
    reply_id = "reply-" + hashlib.sha256(message_id.encode()).hexdigest()[:32]
    reply = _agent_message(version, reply_id, [_data_part(version, listing())], context_id or reply_id, None)
    result = {"message": reply} if version == V1 else reply
    return json_answer(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def _agent_message(
    version: str, message_id: str, parts: list[dict], context_id: str, task_id: str | None
) -> dict:
    message: dict = {"kind": "message"} if version == V03 else {}
    message.update(messageId=message_id, role=ROLES[version]["agent"], contextId=context_id)
    if task_id:
        message["taskId"] = task_id
    message["parts"] = parts
    return message


def _data_part(version: str, data: object) -> dict:
    return {"kind": "data", "data": data} if version == V03 else {"data": data, "mediaType": JSON_TYPE}


def _timestamp(issued_at: str) -> str:
    """The receipt's issue time (2026-11-30T05:54:27Z) with the milliseconds A2A asks for."""
    return issued_at[:-1] + ".000Z" if issued_at.endswith("Z") and "." not in issued_at else issued_at


def _error_answer(exc: ProtocolError, request_id: object, version: str) -> Answer:
    error: dict = {"code": exc.rpc_code, "message": exc.message}
    if version == V1 and exc.rpc_code in REASONS:
        error["data"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": REASONS[exc.rpc_code],
                "domain": "a2a-protocol.org",
            }
        ]
    headers = {}
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    request_id = exc.request_id if exc.request_id is not None else request_id
    return json_answer(exc.status, {"jsonrpc": "2.0", "id": request_id, "error": error}, headers)
