"""The dev host's admin API: ``POST /admin/functions/{name}`` runs a timer function now, as the
Functions host's admin API does, for a developer's own tools and never for a web page elsewhere.
In this order: a foreign ``Origin``, or a cross-site fetch with none, is 403; a missing or wrong
key, where ``STOREFRONT_DEV_MASTER_KEY`` is set, 401; an unknown name or a method but POST 404; a
``Content-Type`` but JSON 415, and a body that is not a JSON object 400. Every refusal but the 404
has a JSON body shaped as the store's errors are. Why: docs/development.md#dev-host.
"""

from __future__ import annotations

import hmac
import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from shared.config.settings import Settings
from shared.protocols.http import origin_allowed

if TYPE_CHECKING:
    from devstack.devhost.app_index import BackgroundFunction

ADMIN_PREFIX = "/admin/functions/"
MASTER_KEY_SETTING = "STOREFRONT_DEV_MASTER_KEY"
JSON_TYPE = "application/json"

Answer = tuple[int, list[tuple[str, str]], bytes]
log = logging.getLogger("devhost")


@dataclass(frozen=True)
class AdminRequest:
    """One request under ADMIN_PREFIX: `headers` with lower-case names, `query` undecoded."""

    method: str
    path: str
    headers: Mapping[str, str]
    query: str
    body: bytes

    @property
    def function_name(self) -> str:
        return self.path[len(ADMIN_PREFIX) :]

    @property
    def key(self) -> str | None:
        return self.headers.get("x-functions-key") or next(iter(parse_qs(self.query).get("code", [])), None)


def _error(status: int, code: str, message: str) -> Answer:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    return status, [("Content-Type", JSON_TYPE)], body


@dataclass(frozen=True)
class AdminApi:
    """Who may run timers through the admin API; `answer` serves one admin request."""

    allowed_hosts: tuple[str, ...] = ()
    master_key: str = ""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AdminApi:
        """Read after load_app has applied local settings; a malformed setting stops start-up, naming it."""
        env = os.environ if env is None else env
        allowed = Settings.from_env(env).allowed_origins
        return cls(allowed_hosts=allowed, master_key=env.get(MASTER_KEY_SETTING, "").strip())

    def answer(
        self,
        request: AdminRequest,
        functions: Iterable[BackgroundFunction],
        wait: Callable[[Awaitable[Any]], Any],
    ) -> Answer:
        """Run the named function now (`wait` runs a coroutine to its end) or say why not."""
        refused = self._refuse_caller(request)
        if refused is not None:
            return refused
        name = request.function_name.lower()
        function = next((f for f in functions if f.name.lower() == name), None)
        if request.method != "POST" or function is None:
            return 404, [], b""
        return _refuse_body(request.headers.get("content-type"), request.body) or _run(function, wait)

    def _refuse_caller(self, request: AdminRequest) -> Answer | None:
        origin = request.headers.get("origin")
        if not origin_allowed(origin, self.allowed_hosts):
            return _error(403, "forbidden_origin", "requests from this Origin are not allowed")
        if origin is None and request.headers.get("sec-fetch-site", "").strip().lower() == "cross-site":
            return _error(403, "forbidden_origin", "requests from a page on another site are not allowed")
        if self.master_key and not _matches(request.key, self.master_key):
            return _error(
                401,
                "unauthorized",
                f"the admin API needs the master key ({MASTER_KEY_SETTING}) in the x-functions-key "
                "header or the code query parameter",
            )
        return None


def _matches(given: str | None, key: str) -> bool:
    # Compared as bytes: compare_digest refuses non-ASCII text, which a header may carry.
    return given is not None and hmac.compare_digest(given.encode(), key.encode())


def _refuse_body(content_type: str | None, body: bytes) -> Answer | None:
    if content_type is not None and content_type.split(";")[0].strip().lower() != JSON_TYPE:
        return _error(415, "unsupported_media_type", 'send the body as application/json: {"input": ""}')
    if not body:
        return None
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):  # malformed, not Unicode, or nested past the parser's limit
        parsed = None
    if not isinstance(parsed, dict):
        return _error(400, "invalid_request", 'the body must be a JSON object: {"input": ""}')
    return None


def _run(function: BackgroundFunction, wait: Callable[[Awaitable[Any]], Any]) -> Answer:
    """Unlike Azure, the answer comes after the run, so the caller sees its effects."""
    try:
        result = function.run()
        if inspect.isawaitable(result):
            wait(result)
    except TypeError as exc:
        return 400, [("Content-Type", "text/plain")], str(exc).encode()
    except Exception:
        log.exception("Executed 'Functions.%s' (Failed)", function.name)
        return 500, [], b""
    return 202, [], b""
