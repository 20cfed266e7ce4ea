"""A2A's answer shapes, for 1.0 (ProtoJSON, `TASK_STATE_*`, errors with google.rpc details) and
0.3 (`kind` discriminators): a finished task carrying the receipt verbatim, a direct message, an
empty task list, and a JSON-RPC error."""

from __future__ import annotations

import hashlib
import json
import secrets

from shared.config.errors import ProtocolError
from shared.protocols.a2a.protocol import (
    CONTENT_TYPE_NOT_SUPPORTED,
    PUSH_NOT_SUPPORTED,
    ROLES,
    TASK_NOT_CANCELABLE,
    TASK_NOT_FOUND,
    UNSUPPORTED_OPERATION,
    V03,
    V1,
    VERSION_NOT_SUPPORTED,
)
from shared.protocols.a2a.requests import ListQuery, Send
from shared.protocols.http import JSON_TYPE, Answer, json_answer
from shared.purchase.call import Outcome

ARTIFACT_ID = "receipt"
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


def task_answer(
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
        parts = [text_part(version, text)]
        status["message"] = agent_message(version, f"{task_id}-status", parts, context_id, task_id)
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
                "parts": [data_part(version, data)],
            }
        ],
    )
    if replayed:
        task["metadata"] = {"storefront/replayed": True}
    return task


def message_answer(request_id: object, version: str, send: Send, parts: list[dict]) -> Answer:
    """A direct Message (no task): its id derives from the caller's, so a resend gets the same reply."""
    reply_id = "reply-" + hashlib.sha256(send.message_id.encode()).hexdigest()[:32]
    reply = agent_message(version, reply_id, parts, send.context_id or reply_id, None)
    result = {"message": reply} if version == V1 else reply
    return json_answer(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def list_answer(request_id: object, query: ListQuery) -> Answer:
    """No task is visible to an unauthenticated caller: one empty, final page."""
    page = {"tasks": [], "nextPageToken": "", "pageSize": query.page_size, "totalSize": 0}
    return json_answer(200, {"jsonrpc": "2.0", "id": request_id, "result": page})


def agent_message(
    version: str, message_id: str, parts: list[dict], context_id: str, task_id: str | None
) -> dict:
    message: dict = {"kind": "message"} if version == V03 else {}
    message.update(messageId=message_id, role=ROLES[version]["agent"], contextId=context_id)
    if task_id:
        message["taskId"] = task_id
    message["parts"] = parts
    return message


def text_part(version: str, text: str) -> dict:
    return {"kind": "text", "text": text} if version == V03 else {"text": text}


def data_part(version: str, data: object) -> dict:
    return {"kind": "data", "data": data} if version == V03 else {"data": data, "mediaType": JSON_TYPE}


def _timestamp(issued_at: str) -> str:
    """The receipt's issue time (2026-11-30T05:54:27Z) with the milliseconds A2A asks for."""
    return issued_at[:-1] + ".000Z" if issued_at.endswith("Z") and "." not in issued_at else issued_at


def error_answer(exc: ProtocolError, request_id: object, version: str) -> Answer:
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
