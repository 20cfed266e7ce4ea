"""Brevo's rate limits (developers.brevo.com "Rate limits" and "Rate limit headers"): four families
of endpoints, each with its own fixed window, per tier, for the whole account.

A window opens with the first request that finds none open and lasts one second (per-second
limits) or one hour (per-hour limits). Every answer on ``/v3`` says where its family stands in
``x-sib-ratelimit-limit``, ``-remaining`` and ``-reset`` (whole seconds until the window ends, at
least 1); past the limit the answer is 429 without ``Retry-After``, as Brevo's is.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

FAMILIES = ("email", "contacts", "smtp_other", "other")
FAMILY_ROUTES = {
    "email": "POST /v3/smtp/email",
    "contacts": "/v3/contacts and everything under it",
    "smtp_other": "every other /v3/smtp/ route",
    "other": "everything else under /v3",
}
SPEC_RE = re.compile(r"([0-9]{1,9})/([sh])")
WINDOWS = {"s": 1, "h": 3600}
TOO_MANY_REQUESTS = "too_many_requests"
LIMIT_HEADER = "x-sib-ratelimit-limit"
REMAINING_HEADER = "x-sib-ratelimit-remaining"
RESET_HEADER = "x-sib-ratelimit-reset"


@dataclass(frozen=True)
class Limit:
    count: int
    window: int  # seconds

    def __str__(self) -> str:
        return f"{self.count}/{'s' if self.window == 1 else 'h'}"


TIERS: dict[str, dict[str, Limit]] = {
    "general": {
        "email": Limit(1000, 1),
        "contacts": Limit(10, 1),
        "smtp_other": Limit(2, 1),
        "other": Limit(100, 3600),
    },
    "advanced": {
        "email": Limit(2000, 1),
        "contacts": Limit(20, 1),
        "smtp_other": Limit(2, 1),
        "other": Limit(200, 3600),
    },
    "extended": {
        "email": Limit(6000, 1),
        "contacts": Limit(60, 1),
        "smtp_other": Limit(2, 1),
        "other": Limit(200, 3600),
    },
}
DEFAULT_TIER = "general"


def family_of(method: str, path: str) -> str:
    """The family whose window a request to *path* (under ``/v3/``) counts in."""
    if path == "/v3/smtp/email" and method == "POST":
        return "email"
    if path == "/v3/contacts" or path.startswith("/v3/contacts/"):
        return "contacts"
    if path.startswith("/v3/smtp/"):
        return "smtp_other"
    return "other"


def parse_limit(text: Any) -> Limit | None:
    """``N/s``, ``N/h`` (N a positive whole number) or ``off`` (None: no limit)."""
    if text == "off":
        return None
    match = SPEC_RE.fullmatch(text) if isinstance(text, str) else None
    if match is None or int(match.group(1)) < 1:
        raise ValueError(f"{text!r} is not a limit: use N/s or N/h with N a positive whole number, or off")
    return Limit(int(match.group(1)), WINDOWS[match.group(2)])


def parse_limit_option(text: str) -> tuple[str, str]:
    """``FAMILY=SPEC`` from the command line, checked; the spec stays text for ``RateLimiter``."""
    family, sep, spec = text.partition("=")
    if not sep:
        raise ValueError(f"{text!r} is not FAMILY=N/s, FAMILY=N/h or FAMILY=off")
    check_family(family)
    parse_limit(spec)
    return family, spec


def check_family(family: Any) -> str:
    if family not in FAMILIES:
        raise ValueError(f"{family!r} is not a family: use one of {', '.join(FAMILIES)}")
    return family


def resolve_limits(tier: Any, overrides: Mapping[str, Any] | None) -> dict[str, Limit | None]:
    """The limit of every family: the tier's, unless *overrides* names a spec (None keeps the
    tier's)."""
    if tier not in TIERS:
        raise ValueError(f"{tier!r} is not a tier: use one of {', '.join(TIERS)}")
    limits: dict[str, Limit | None] = dict(TIERS[tier])
    for family, spec in (overrides or {}).items():
        check_family(family)
        if spec is not None:
            limits[family] = parse_limit(spec)
    return limits


@dataclass
class _Counter:
    window_start: float | None = None
    used: int = 0
    accepted: int = 0
    refused: int = 0


@dataclass(frozen=True)
class Decision:
    allowed: bool
    headers: dict[str, str]


class RateLimiter:
    """The account's windows and counters; every public method takes its own lock."""

    def __init__(
        self,
        tier: str = DEFAULT_TIER,
        limits: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._start_config = (tier, dict(limits or {}))
        self._limits = resolve_limits(tier, limits)
        self._tier = tier
        self._overrides = {f: s for f, s in (limits or {}).items() if s is not None}
        self._counters = {family: _Counter() for family in FAMILIES}

    def configure(self, tier: Any, limits: Mapping[str, Any] | None) -> None:
        """Switch tier and overrides; open windows close, totals stay."""
        resolved = resolve_limits(tier, limits)
        with self._lock:
            self._tier, self._limits = tier, resolved
            self._overrides = {f: s for f, s in (limits or {}).items() if s is not None}
            for counter in self._counters.values():
                counter.window_start, counter.used = None, 0

    def reset(self) -> None:
        """Back to the start-up tier and limits, every counter at zero."""
        tier, limits = self._start_config
        with self._lock:
            self._tier, self._limits, self._overrides = tier, resolve_limits(tier, limits), dict(limits)
            self._counters = {family: _Counter() for family in FAMILIES}

    def take(self, family: str) -> Decision:
        """Count one request in its family's window, or refuse it (and count the refusal)."""
        with self._lock:
            limit, counter = self._limits[family], self._counters[family]
            if limit is None:
                counter.accepted += 1
                return Decision(True, {})
            now = self._roll(counter, limit)
            if counter.used >= limit.count:
                counter.refused += 1
                return Decision(False, _headers(limit, 0, self._reset(counter, limit, now)))
            counter.used += 1
            counter.accepted += 1
            reset = self._reset(counter, limit, now)
            return Decision(True, _headers(limit, limit.count - counter.used, reset))

    def refuse(self, family: str, reset: int | None = None) -> dict[str, str]:
        """Count a 429 answered for the family by other means (a storm), leaving its window as it
        is; the headers that go with it (*reset* None: the window's)."""
        with self._lock:
            limit, counter = self._limits[family], self._counters[family]
            counter.refused += 1
            if limit is None:
                return {}
            return _headers(limit, 0, reset if reset is not None else self._reset_now(counter, limit))

    def peek(self, family: str) -> dict[str, str]:
        """Where the family stands, for an answer that does not count (no api-key, body too big)."""
        with self._lock:
            limit, counter = self._limits[family], self._counters[family]
            if limit is None:
                return {}
            now = self._clock()
            if not self._open(counter, limit, now):
                return _headers(limit, limit.count, limit.window)
            return _headers(limit, limit.count - counter.used, self._reset(counter, limit, now))

    def snapshot(self) -> dict[str, Any]:
        """The tier, the overrides and, per family, its limit, window and totals."""
        with self._lock:
            now = self._clock()
            families = {f: self._family_view(f, now) for f in FAMILIES}
            return {"tier": self._tier, "overrides": dict(self._overrides), "families": families}

    def _family_view(self, family: str, now: float) -> dict[str, Any]:
        limit, counter = self._limits[family], self._counters[family]
        view: dict[str, Any] = {
            "routes": FAMILY_ROUTES[family],
            "limit": str(limit) if limit else "off",
            "used": 0,
            "remaining": None,
            "reset": None,
            "accepted": counter.accepted,
            "refused": counter.refused,
        }
        if limit is not None:
            open_window = self._open(counter, limit, now)
            view["used"] = counter.used if open_window else 0
            view["remaining"] = limit.count - view["used"]
            view["reset"] = self._reset(counter, limit, now) if open_window else limit.window
        return view

    def _roll(self, counter: _Counter, limit: Limit) -> float:
        """Open a new window when none is open; the time now. Lock must be held."""
        now = self._clock()
        if not self._open(counter, limit, now):
            counter.window_start, counter.used = now, 0
        return now

    def _reset_now(self, counter: _Counter, limit: Limit) -> int:
        now = self._clock()
        return self._reset(counter, limit, now) if self._open(counter, limit, now) else limit.window

    @staticmethod
    def _open(counter: _Counter, limit: Limit, now: float) -> bool:
        return counter.window_start is not None and now - counter.window_start < limit.window

    @staticmethod
    def _reset(counter: _Counter, limit: Limit, now: float) -> int:
        """Whole seconds until the open window ends, at least 1."""
        start = now if counter.window_start is None else counter.window_start
        return max(1, math.ceil(start + limit.window - now))


def _headers(limit: Limit, remaining: int, reset: int) -> dict[str, str]:
    return {
        LIMIT_HEADER: str(limit.count),
        REMAINING_HEADER: str(remaining),
        RESET_HEADER: str(reset),
    }


def too_many_requests(family: str) -> dict[str, str]:
    """The body of a 429, as Brevo words it."""
    return {"code": TOO_MANY_REQUESTS, "message": f"Too many requests: the {family} rate limit is reached"}
