"""Fault injection (``/_sandbox/faults``): what a test asks for (a status, a delay, or both, on one
Brevo path, optionally only for requests containing some text) and how a request matches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from devstack.brevo_sandbox.wire import BREVO_PATHS, invalid, is_int, string_field

DEFAULT_FAULT_BODY = {"code": "internal_error", "message": "Injected fault"}
# What Brevo sends with a 429 (and no Retry-After); a fault's own headers override these.
RATE_LIMIT_HEADERS = {
    "x-sib-ratelimit-limit": "10",
    "x-sib-ratelimit-remaining": "0",
    "x-sib-ratelimit-reset": "1",
}
HEADER_NAME_RE = re.compile(r"[A-Za-z0-9-]{1,64}")
PRINTABLE_RE = re.compile(r"[ -~]{0,1024}")
OWN_HEADERS = frozenset({"content-type", "content-length", "cache-control", "connection"})


@dataclass
class Fault:
    id: int
    path: str
    status: int | None
    times: int
    match: str | None
    delay_seconds: float
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _parse_fault_status(value: Any) -> int | None:
    if value in (None, 0):
        return None
    if not is_int(value) or not 400 <= value <= 599:
        raise invalid("status must be an integer between 400 and 599, or 0/null")
    return value


def _parse_delay(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise invalid("delay_seconds must be a non-negative number")
    return float(value)


def parse_fault(payload: dict[str, Any]) -> Fault:
    path = payload.get("path")
    if path not in BREVO_PATHS:
        raise invalid(f"path must be one of {', '.join(BREVO_PATHS)}")
    times = payload.get("times", 1)
    if not is_int(times) or times < 1:
        raise invalid("times must be a positive integer")
    status = _parse_fault_status(payload.get("status"))
    delay = _parse_delay(payload.get("delay_seconds"))
    if status is None and delay == 0:
        raise invalid("A fault needs a status, a delay_seconds, or both")
    match = string_field(payload, "match")
    body = payload.get("body") or dict(DEFAULT_FAULT_BODY)
    if not isinstance(body, dict):
        raise invalid("body must be an object")
    headers = _parse_fault_headers(payload.get("headers"))
    if status == 429:
        headers = {**RATE_LIMIT_HEADERS, **headers}
    return Fault(0, path, status, times, match, delay, body, headers)


def _parse_fault_headers(value: Any) -> dict[str, str]:
    """Extra response headers: lower-cased names (so they override the defaults whatever their
    case), printable ASCII values, and none of the headers the sandbox writes itself."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid("headers must be an object")
    headers = {}
    for name, text in value.items():
        if not (isinstance(name, str) and HEADER_NAME_RE.fullmatch(name)):
            raise invalid("header names are letters, digits and dashes")
        if name.lower() in OWN_HEADERS:
            raise invalid(f"{name} is set by the sandbox itself")
        if not (isinstance(text, str) and PRINTABLE_RE.fullmatch(text)):
            raise invalid(f"the {name} header needs a printable ASCII string")
        headers[name.lower()] = text
    return headers


def fault_matches(fault: Fault, body: bytes) -> bool:
    return fault.match is None or fault.match.encode("utf-8") in body
