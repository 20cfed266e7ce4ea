"""What every endpoint shares: Brevo-style errors, the request and response records the app
passes around, and the checks JSON fields go through.

An ``ApiError`` raised anywhere below the app becomes Brevo's ``{"code", "message"}`` answer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.message import Message
from typing import Any, TypeGuard

BREVO_PATHS = ("/v3/contacts", "/v3/contacts/import", "/v3/smtp/email", "/v3/smtp/emails")
JSON_TYPE = "application/json"
HTML_TYPE = "text/html; charset=utf-8"

EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")


class ApiError(Exception):
    """A Brevo-style error: HTTP status plus ``{"code", "message"}`` body, and ``metadata`` where
    Brevo sends it."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}
        self.metadata = metadata


def invalid(message: str) -> ApiError:
    return ApiError(400, "invalid_parameter", message)


def missing(message: str) -> ApiError:
    return ApiError(400, "missing_parameter", message)


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = JSON_TYPE
    headers: dict[str, str] = field(default_factory=dict)


def json_response(status: int, payload: Any) -> Response:
    return Response(status, json.dumps(payload).encode("utf-8"))


def error_response(status: int, code: str, message: str) -> Response:
    return json_response(status, {"code": code, "message": message})


def html_response(status: int, page: str) -> Response:
    return Response(status, page.encode("utf-8"), HTML_TYPE)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        payload = None
    if not isinstance(payload, dict):
        raise ApiError(400, "bad_request", "Input must be a json object")
    return payload


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_email(value: Any) -> TypeGuard[str]:
    return isinstance(value, str) and EMAIL_RE.match(value) is not None


def object_field(payload: dict[str, Any], key: str) -> dict[str, Any]:
    value = payload.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(f"{key} must be an object")
    return value


def string_field(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid(f"{key} must be a string")
    return value or None


def query_value(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None
