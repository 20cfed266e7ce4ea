"""Reading an A2A JSON-RPC request (`POST /api/a2a`) into plain records that `endpoint` acts on.

Everything a caller can get wrong is refused here, before any storage call, with the code the
spec gives it: the transport (-32005 with HTTP 415 for a body that is not declared JSON), the
envelope (-32700 parse, -32600 not a request), the version (-32009), the method (-32601), the
params (-32602, naming the field at fault), a media type this agent does not read (-32005) and
push configuration (-32003). A request without an `id` is a JSON-RPC notification, which no A2A
method is: it is checked like any other and then refused (-32600), never acted on.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from shared.config.errors import UnsupportedMediaType
from shared.protocols.a2a.protocol import (
    CONTENT_TYPE_NOT_SUPPORTED,
    INPUT_MODES,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    METHODS,
    PARSE_ERROR,
    PUSH_NOT_SUPPORTED,
    PUSH_REFUSAL,
    ROLES,
    TASK_STATES,
    TEXT_TYPE,
    V03,
    V1,
    VERSION_NOT_SUPPORTED,
    rpc_error,
)
from shared.protocols.http import (
    JSON_TYPE,
    MAX_BODY_BYTES,
    JSONTooDeep,
    Request,
    check_json_declared,
    parse_json,
)

INT32_MAX = 2**31 - 1
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 100
_INTEGER = re.compile(r"-?[0-9]{1,10}")
_TIMESTAMP = re.compile(
    r"(?P<time>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2})"
)


@dataclass(frozen=True)
class Envelope:
    """A JSON-RPC 2.0 request object; `notification` when it has no `id`."""

    request_id: object
    notification: bool
    method: str
    params: object


@dataclass(frozen=True)
class Send:
    """SendMessage: the message's ids and its structured input, if it has one (a data part, or a
    text part holding only a JSON object); None when it holds text alone."""

    message_id: str
    context_id: str | None
    task_id: str | None
    data: dict | None


@dataclass(frozen=True)
class TaskQuery:
    """GetTask and CancelTask: the task's id."""

    task_id: str


@dataclass(frozen=True)
class ListQuery:
    """ListTasks: the page size the answer reports (every filter is checked, none can match)."""

    page_size: int


# --- the transport and the envelope -------------------------------------------------------------


def check_content_type(req: Request) -> None:
    """The JSON-RPC binding sends `application/json`: the rule of every POST route
    (`shared.protocols.http.check_json_declared`), a refusal answered with the spec's -32005."""
    try:
        check_json_declared(req)
    except UnsupportedMediaType as exc:
        raise rpc_error(CONTENT_TYPE_NOT_SUPPORTED, exc.message, status=exc.status) from None


def read_envelope(body: bytes) -> Envelope:
    """The JSON-RPC request object, or -32700 (not JSON) / -32600 (not a request)."""
    if len(body) > MAX_BODY_BYTES:
        raise rpc_error(INVALID_REQUEST, f"request exceeds {MAX_BODY_BYTES} bytes", status=413)
    try:
        message = parse_json(body)
    except JSONTooDeep as exc:
        raise rpc_error(PARSE_ERROR, f"Parse error: {exc}") from None
    except ValueError:
        raise rpc_error(PARSE_ERROR, "Parse error: body is not JSON") from None
    if isinstance(message, list):
        raise rpc_error(INVALID_REQUEST, "batches are not supported: send one JSON-RPC request per POST")
    if not isinstance(message, dict):
        raise rpc_error(INVALID_REQUEST, "not a JSON-RPC 2.0 request object")
    request_id = message.get("id")
    if not _valid_id(request_id):
        raise rpc_error(INVALID_REQUEST, "id must be a string or a number")
    if message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
        raise rpc_error(
            INVALID_REQUEST,
            'not a JSON-RPC 2.0 request: "jsonrpc" must be "2.0", "method" a string',
            request_id=request_id,
        )
    return Envelope(request_id, "id" not in message, message["method"], message.get("params", {}))


def _valid_id(request_id: object) -> bool:
    """A string, a number or null; not a boolean, and not NaN or Infinity, which Python's json reads."""
    if isinstance(request_id, float):
        return math.isfinite(request_id)
    return request_id is None or (isinstance(request_id, (str, int)) and not isinstance(request_id, bool))


def requested_version(req: Request) -> str:
    """1.0 or 0.3 from A2A-Version (patch levels ignored; absent or empty is 0.3), else -32009."""
    asked = (req.header("a2a-version") or req.params.get("A2A-Version") or "").strip()
    if not asked:
        return V03
    parts = asked.split(".")
    if len(parts) in (2, 3) and ".".join(parts[:2]) in (V1, V03) and all(p.isdigit() for p in parts):
        return ".".join(parts[:2])
    raise rpc_error(VERSION_NOT_SUPPORTED, f"A2A-Version {asked[:20]!r} is not supported; use 1.0 or 0.3")


def operation_of(method: str, version: str) -> str:
    """What the method asks ("send", "get", ...), or -32601 for an unknown or other-version method."""
    if method not in METHODS:
        raise rpc_error(METHOD_NOT_FOUND, f"method not found: {method}")
    family, operation = METHODS[method]
    if family != version:
        raise rpc_error(
            METHOD_NOT_FOUND,
            f"{method} is an A2A {family} method, but this request is A2A {version} (A2A-Version "
            f"header; absent means 0.3). Send A2A-Version: {family}, or use the {version} method.",
        )
    return operation


def read_params(operation: str, version: str, params: object) -> Send | TaskQuery | ListQuery | None:
    """The operation's params as a record; None for an operation refused whatever its params."""
    if not isinstance(params, dict):
        raise rpc_error(INVALID_PARAMS, "params must be an object", field="params")
    _optional(params, "tenant", str)
    _optional(params, "metadata", dict)
    if operation == "send":
        return _send(version, params)
    if operation in ("get", "cancel"):
        if operation == "get":
            _int32(params, "historyLength", low=0)
        task_id = params.get("id")
        if not isinstance(task_id, str) or not task_id:
            raise rpc_error(INVALID_PARAMS, "params.id must be the task's id", field="id")
        return TaskQuery(task_id)
    if operation == "list":
        return _list(params)
    return None


# --- SendMessage ---------------------------------------------------------------------------------


def _send(version: str, params: dict) -> Send:
    message = params.get("message")
    if not isinstance(message, dict):
        raise rpc_error(INVALID_PARAMS, "params.message must be a Message object", field="message")
    message_id = message.get("messageId")
    if not isinstance(message_id, str) or not message_id:
        raise rpc_error(
            INVALID_PARAMS, "message.messageId must be a non-empty string", field="message.messageId"
        )
    user = ROLES[version]["user"]
    if message.get("role") != user:
        raise rpc_error(
            INVALID_PARAMS,
            f"message.role is required and must be {user} (a message to this agent is the user's)",
            field="message.role",
        )
    if version == V03 and message.get("kind", "message") != "message":
        raise rpc_error(INVALID_PARAMS, 'message.kind must be "message"', field="message.kind")
    for name in ("contextId", "taskId"):
        _optional(message, name, str, prefix="message.")
    _optional(message, "metadata", dict, prefix="message.")
    _configuration(version, params.get("configuration"))
    return Send(
        message_id=message_id,
        context_id=message.get("contextId") or None,
        task_id=message.get("taskId") or None,
        data=_structured_input(version, message.get("parts")),
    )


def _configuration(version: str, configuration: object) -> None:
    if configuration is None:
        return
    if not isinstance(configuration, dict):
        raise rpc_error(INVALID_PARAMS, "params.configuration must be an object", field="configuration")
    push = "taskPushNotificationConfig" if version == V1 else "pushNotificationConfig"
    if configuration.get(push):
        raise rpc_error(PUSH_NOT_SUPPORTED, PUSH_REFUSAL)
    modes = configuration.get("acceptedOutputModes", [])
    if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
        raise rpc_error(
            INVALID_PARAMS,
            "configuration.acceptedOutputModes must be a list of media types",
            field="configuration.acceptedOutputModes",
        )
    _int32(configuration, "historyLength", low=0, prefix="configuration.")
    _optional(
        configuration, "returnImmediately" if version == V1 else "blocking", bool, prefix="configuration."
    )


def _structured_input(version: str, parts: object) -> dict | None:
    """The one JSON object the message carries: its data part, else a text part that is only a
    JSON object. Text beside it is ignored; text alone gives None."""
    if not isinstance(parts, list) or not parts or not all(isinstance(p, dict) for p in parts):
        raise rpc_error(
            INVALID_PARAMS, "message.parts must be a non-empty list of parts", field="message.parts"
        )
    typed = [(_part_kind(version, part, f"message.parts[{n}]"), part) for n, part in enumerate(parts)]
    data = [part["data"] for kind, part in typed if kind == "data"]
    if not data:
        texts = [(n, part) for n, (kind, part) in enumerate(typed) if kind == "text"]
        data = [found for n, part in texts for found in _json_text(part, f"message.parts[{n}].text")]
    if len(data) > 1:
        raise rpc_error(
            INVALID_PARAMS,
            "send exactly one JSON object (one data part, or one JSON text)",
            field="message.parts",
        )
    if data and not isinstance(data[0], dict):
        raise rpc_error(INVALID_PARAMS, "the data part must hold a JSON object", field="message.parts")
    return data[0] if data else None


def _part_kind(version: str, part: dict, where: str) -> str:
    """The part's kind, text or data. A file (raw, url, 0.3 file) or a media type this agent does
    not read is -32005; a part of no known kind is -32602."""
    if version == V03:
        kind = part.get("kind")
        if kind == "file":
            raise rpc_error(CONTENT_TYPE_NOT_SUPPORTED, _NO_FILES)
        if kind not in ("text", "data"):
            raise rpc_error(INVALID_PARAMS, f'{where}.kind must be "text", "data" or "file"', field=where)
    else:
        present = [k for k in ("text", "raw", "url", "data") if k in part]
        if len(present) != 1:
            raise rpc_error(
                INVALID_PARAMS, f"{where} must have exactly one of text, raw, url or data", field=where
            )
        kind = present[0]
        if kind in ("raw", "url"):
            raise rpc_error(CONTENT_TYPE_NOT_SUPPORTED, _NO_FILES)
    if kind == "text" and not isinstance(part.get("text"), str):
        raise rpc_error(INVALID_PARAMS, f"{where}.text must be a string", field=f"{where}.text")
    if kind == "data" and "data" not in part:
        raise rpc_error(INVALID_PARAMS, f"{where}.data is missing", field=f"{where}.data")
    media_type = part.get("mediaType") or None
    if media_type is not None and media_type not in ((JSON_TYPE,) if kind == "data" else INPUT_MODES):
        raise rpc_error(
            CONTENT_TYPE_NOT_SUPPORTED,
            f"{where}.mediaType {str(media_type)[:60]!r} is not supported: a data part is {JSON_TYPE}, "
            f"a text part {TEXT_TYPE} or {JSON_TYPE}",
        )
    return kind


_NO_FILES = (
    "file parts are not supported: this agent reads a data part (application/json) or text, never a file"
)


def _json_text(part: dict, where: str) -> list[dict]:
    """[the object] when the text is one JSON object (bare, or alone in a ``` fence), else []."""
    text = _unfenced(part["text"].strip())
    if not text.startswith("{"):
        return []
    try:
        found = parse_json(text.encode())
    except ValueError as exc:
        raise rpc_error(
            INVALID_PARAMS, f"{where} starts like a JSON object but is not valid JSON: {exc}", field=where
        ) from None
    return [found] if isinstance(found, dict) else []  # text from "{" parses to an object


def _unfenced(text: str) -> str:
    """The body of a Markdown code fence (```json ... ```), or the text as it is. Read by slicing,
    never by a regular expression: a fence of megabytes of blank lines takes no longer than its length."""
    opening, newline, rest = text.partition("\n")
    language = opening[3:].strip()
    if (
        opening.startswith("```")
        and newline
        and rest.endswith("```")
        and (not language or language.isalpha())
    ):
        return rest[:-3].strip()
    return text


# --- ListTasks -----------------------------------------------------------------------------------


def _list(params: dict) -> ListQuery:
    """Every filter the request may carry, checked as the spec bounds it (pageSize 1-100,
    historyLength >= 0, a known status, an RFC 3339 timestamp); a pageToken can only be one this
    agent issued, and it issues none."""
    _optional(params, "contextId", str)
    _optional(params, "includeArtifacts", bool)
    page_size = _int32(params, "pageSize", low=1, high=MAX_PAGE_SIZE)
    _int32(params, "historyLength", low=0)
    status = params.get("status")
    known = (
        status in TASK_STATES
        if isinstance(status, str)
        else type(status) is int and 0 <= status < len(TASK_STATES)
    )
    if status is not None and not known:
        raise rpc_error(INVALID_PARAMS, f"status must be one of {', '.join(TASK_STATES[1:])}", field="status")
    after = params.get("statusTimestampAfter")
    if after is not None and not _is_timestamp(after):
        raise rpc_error(
            INVALID_PARAMS,
            'statusTimestampAfter must be an RFC 3339 timestamp such as "2026-01-31T10:00:00Z"',
            field="statusTimestampAfter",
        )
    token = params.get("pageToken", "")
    if not isinstance(token, str) or token:
        raise rpc_error(
            INVALID_PARAMS,
            "pageToken is not one this agent issued (it issues none: every listing is one page)",
            field="pageToken",
        )
    return ListQuery(DEFAULT_PAGE_SIZE if page_size is None else page_size)


def _is_timestamp(value: object) -> bool:
    found = _TIMESTAMP.fullmatch(value) if isinstance(value, str) else None
    if not found:
        return False
    try:
        datetime.strptime(found["time"], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return False
    return True


# --- fields --------------------------------------------------------------------------------------


def _optional(container: dict, name: str, kind: type, prefix: str = "") -> None:
    value = container.get(name)
    if value is not None and (not isinstance(value, kind) or (kind is not bool and isinstance(value, bool))):
        label = {str: "a string", dict: "an object", bool: "true or false"}[kind]
        raise rpc_error(INVALID_PARAMS, f"{prefix}{name} must be {label}", field=prefix + name)


def _int32(container: dict, name: str, *, low: int, high: int = INT32_MAX, prefix: str = "") -> int | None:
    """An optional int32 (a JSON number, or the decimal string ProtoJSON also allows) within
    [low, high]; None when absent."""
    value = container.get(name)
    if value is None:
        return None
    number = value
    integral = isinstance(value, float) and value.is_integer()
    if integral or (isinstance(value, str) and _INTEGER.fullmatch(value)):
        number = int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise rpc_error(
            INVALID_PARAMS,
            f"{prefix}{name} must be an integer from {low} to {high}; got {str(value)[:40]}",
            field=prefix + name,
        )
    return number
