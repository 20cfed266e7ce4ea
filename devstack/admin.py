"""The dev host's admin API: ``POST /admin/functions/{name}`` runs a timer function now, as the
Functions host's admin API does, for a developer's own tools and never for a web page elsewhere.

The dev host listens on the developer's machine, where any page the browser opens can send it a
request. So, in this order:

* A present ``Origin`` must pass the store's own rule (``shared.protocols.http.origin_allowed``: loopback
  hosts plus ``STOREFRONT_ALLOWED_ORIGINS``), else 403. With no ``Origin``, a browser's
  ``Sec-Fetch-Site: cross-site`` is a 403 too. curl, scripts and tests send neither.
* With ``STOREFRONT_DEV_MASTER_KEY`` set, the key must come as Azure takes it (``x-functions-key``
  header or ``code`` query parameter), else 401. Unset, no key is asked for, as with ``func start``.
* Unknown names and methods other than POST answer 404.
* The body is JSON, as Azure documents it (``{"input": ""}``): another ``Content-Type`` is 415,
  because a form can send those to any site without the browser asking first (a CORS preflight,
  which the dev host never grants). A body that is not a JSON object is 400.

The 403, 401, 415 and 400 answers have a JSON body shaped as the store's errors are.
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
