"""A2A's vocabulary, shared by reading a request and answering it: the two protocol versions, the
media types read, the JSON-RPC error codes (the spec's and A2A's own), every method of both
versions and the operation it names, roles and task states, and the one error constructor."""

from __future__ import annotations

from shared.config.errors import ProtocolError
from shared.protocols.http import JSON_TYPE

V1, V03 = "1.0", "0.3"
TEXT_TYPE = "text/plain"
INPUT_MODES = [JSON_TYPE, TEXT_TYPE]

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
ROLES = {V1: {"user": "ROLE_USER", "agent": "ROLE_AGENT"}, V03: {"user": "user", "agent": "agent"}}
TASK_STATES = (
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)
PUSH_REFUSAL = (
    "push notifications are not supported (capabilities.pushNotifications is false): every "
    "task is finished when SendMessage answers"
)


def rpc_error(
    code: int,
    message: str,
    *,
    status: int = 200,
    field: str | None = None,
    retry_after: int | None = None,
    request_id: object = None,
) -> ProtocolError:
    """A JSON-RPC error; `field` is the params path at fault (reported as google.rpc.BadRequest)."""
    return ProtocolError(
        message[:300],
        status=status,
        rpc_code=code,
        request_id=request_id,
        field=field,
        retry_after=retry_after,
    )
