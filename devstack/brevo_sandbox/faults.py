"""Fault injection (``/_sandbox/faults``): what a test asks for, how a request matches it, and
the faults in force (``FaultBook``).

A path fault gives a status, a delay, or both, on one Brevo path, optionally only for requests
containing some text. A storm answers every request of one rate-limit family with 429, as Brevo
does past a limit, for a number of requests, a number of seconds, or whichever ends first.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from devstack.brevo_sandbox.limits import FAMILIES, family_of, too_many_requests
from devstack.brevo_sandbox.wire import BREVO_PATHS, invalid, is_int, string_field

DEFAULT_FAULT_BODY = {"code": "internal_error", "message": "Injected fault"}
# What a 429 carries when its family has no limit to report (Brevo sends no Retry-After); a
# fault's own headers override these.
RATE_LIMIT_HEADERS = {
    "x-sib-ratelimit-limit": "10",
    "x-sib-ratelimit-remaining": "0",
    "x-sib-ratelimit-reset": "1",
}
MAX_STORM_SECONDS = 24 * 3600
HEADER_NAME_RE = re.compile(r"[A-Za-z0-9-]{1,64}")
PRINTABLE_RE = re.compile(r"[ -~]{0,1024}")
OWN_HEADERS = frozenset({"content-type", "content-length", "cache-control", "connection"})


@dataclass
class Fault:
    """A path fault (``path`` set) or a storm (``family`` set). ``times`` None: no count limit;
    ``expires_at`` is the storm's end on the monotonic clock, set when it is added."""

    id: int
    path: str | None
    status: int | None
    times: int | None
    match: str | None
    delay_seconds: float
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    family: str | None = None
    seconds: float | None = None
    expires_at: float | None = None

    def listing(self) -> dict[str, Any]:
        view = asdict(self)
        del view["expires_at"]
        return view


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


def _parse_times(value: Any) -> int:
    if not is_int(value) or value < 1:
        raise invalid("times must be a positive integer")
    return value


def _parse_body(payload: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    body = payload.get("body") or dict(default)
    if not isinstance(body, dict):
        raise invalid("body must be an object")
    return body


def parse_fault(payload: dict[str, Any]) -> Fault:
    if payload.get("family") is not None:
        return _parse_storm(payload)
    path = payload.get("path")
    if path not in BREVO_PATHS:
        raise invalid(f"path must be one of {', '.join(BREVO_PATHS)} (or give a family for a storm)")
    times = _parse_times(payload.get("times", 1))
    status = _parse_fault_status(payload.get("status"))
    delay = _parse_delay(payload.get("delay_seconds"))
    if status is None and delay == 0:
        raise invalid("A fault needs a status, a delay_seconds, or both")
    match = string_field(payload, "match")
    default = too_many_requests(family_of("POST", path)) if status == 429 else DEFAULT_FAULT_BODY
    body = _parse_body(payload, default)
    headers = _parse_fault_headers(payload.get("headers"))
    return Fault(0, path, status, times, match, delay, body, headers)


def _parse_storm(payload: dict[str, Any]) -> Fault:
    """``{"family", "times"?, "seconds"?, "body"?, "headers"?}``: 429 for every request of the
    family until *times* requests were answered or *seconds* have passed (one request if neither
    is given)."""
    family = payload["family"]
    if family not in FAMILIES:
        raise invalid(f"family must be one of {', '.join(FAMILIES)}")
    for key in ("path", "match", "delay_seconds"):
        if payload.get(key) is not None:
            raise invalid(f"a storm answers every request of its family at once: no {key}")
    if payload.get("status") not in (None, 429):
        raise invalid("a storm answers 429")
    seconds = payload.get("seconds")
    number = isinstance(seconds, (int, float)) and not isinstance(seconds, bool)
    if seconds is not None and not (number and 0 < seconds <= MAX_STORM_SECONDS):
        raise invalid(f"seconds must be a number above 0 and at most {MAX_STORM_SECONDS}")
    times = payload.get("times")
    times = _parse_times(times) if times is not None else (None if seconds is not None else 1)
    body = _parse_body(payload, too_many_requests(family))
    headers = _parse_fault_headers(payload.get("headers"))
    return Fault(0, None, 429, times, None, 0.0, body, headers, family, seconds)


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


class FaultBook:
    """The faults and storms in force, each used up by the requests it answers. Guarded by the
    lock it is given (the sandbox state's, so one lock still guards all of the sandbox's memory);
    every method takes it but ``clear_held``, which the holder calls."""

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.clear_held()

    def clear_held(self) -> None:
        """Forget every fault and number them from 1 again; the lock must be held."""
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, fault: Fault) -> int:
        with self._lock:
            expires_at = time.monotonic() + fault.seconds if fault.seconds is not None else None
            fault = replace(fault, id=next(self._ids), expires_at=expires_at)
            self._faults.append(fault)
            return fault.id

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def listing(self) -> list[dict[str, Any]]:
        with self._lock:
            self._drop_expired()
            return [f.listing() for f in self._faults]

    def take(self, path: str, body: bytes) -> Fault | None:
        """Consume one use of the oldest fault matching this request (its body, or its query
        string for a GET), if any."""
        with self._lock:
            for fault in self._faults:
                if fault.path == path and fault_matches(fault, body):
                    return self._use(fault)
            return None

    def take_storm(self, family: str) -> tuple[Fault, int | None] | None:
        """Consume one request of the oldest storm on *family*, if any is blowing; with it the
        whole seconds it has left (None for a storm that only counts requests)."""
        with self._lock:
            self._drop_expired()
            for fault in self._faults:
                if fault.family == family:
                    left = None
                    if fault.expires_at is not None:
                        left = max(1, math.ceil(fault.expires_at - time.monotonic()))
                    return self._use(fault), left
            return None

    def _use(self, fault: Fault) -> Fault:
        """Count one use of *fault*, dropping it when spent; lock must be held."""
        if fault.times is not None:
            fault.times -= 1
            if fault.times == 0:
                self._faults.remove(fault)
        return replace(fault)

    def _drop_expired(self) -> None:
        now = time.monotonic()
        self._faults = [f for f in self._faults if f.expires_at is None or f.expires_at > now]
