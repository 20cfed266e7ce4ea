"""The sandbox's own controls, for tests and a developer: ``/_sandbox/*`` reads what was captured
(emails, contacts, imports, counters), reads and sets the rate limits and the account, injects
faults, forgets idempotency keys and resets everything; ``/`` and ``/emails/N`` are the HTML inbox.
None of it is rate limited, and the app refuses a request that changes something to other sites
(``refuse_other_sites``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict
from email.message import Message

from devstack.brevo_sandbox.account import parse_account
from devstack.brevo_sandbox.faults import parse_fault
from devstack.brevo_sandbox.limits import DEFAULT_TIER, RateLimiter
from devstack.brevo_sandbox.pages import render_email, render_email_not_found, render_index
from devstack.brevo_sandbox.state import SandboxState
from devstack.brevo_sandbox.wire import (
    ApiError,
    Request,
    Response,
    html_response,
    invalid,
    json_response,
    parse_json_object,
    query_value,
)
from shared.protocols.http import origin_allowed

Handler = Callable[[Request, re.Match[str]], Response]
LIMITS_KEYS = frozenset({"tier", "limits"})
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def refuse_other_sites(headers: Message) -> None:
    """The sandbox's own controls (reset, faults) change what every test and developer sees, and a
    page on any site could POST to them: a present Origin must be a loopback host, as on the store's
    routes, and a browser's Sec-Fetch-Site must not say cross-site. curl and tests send neither.
    (Brevo's own routes need the api-key header, which no page can add without asking first.)"""
    origin = headers.get("origin")
    if origin is not None and not origin_allowed(origin, ()):
        raise ApiError(403, "forbidden_origin", "requests from this Origin are not allowed")
    if (headers.get("sec-fetch-site") or "").strip().lower() == "cross-site":
        raise ApiError(403, "forbidden_origin", "cross-site requests are not allowed")


class Controls:
    """The control API's and the pages' handlers over the sandbox's state and rate limiter."""

    def __init__(self, state: SandboxState, limiter: RateLimiter) -> None:
        self.state = state
        self.limiter = limiter

    def routes(self) -> list[tuple[str, dict[str, Handler]]]:
        """Each path pattern with its handler per method."""
        return [
            ("/_sandbox/emails", {"GET": self._list_emails}),
            ("/_sandbox/contacts", {"GET": self._list_contacts}),
            ("/_sandbox/imports", {"GET": self._list_imports}),
            ("/_sandbox/stats", {"GET": self._stats}),
            ("/_sandbox/limits", {"GET": self._limits, "PUT": self._set_limits}),
            ("/_sandbox/account", {"GET": self._account, "PUT": self._set_account}),
            (
                "/_sandbox/faults",
                {"GET": self._list_faults, "POST": self._add_fault, "DELETE": self._clear_faults},
            ),
            ("/_sandbox/reset", {"POST": self._reset}),
            ("/_sandbox/idempotency-keys", {"DELETE": self._forget_idempotency_keys}),
            ("/", {"GET": self._index_page}),
            (r"/emails/(\d+)", {"GET": self._email_page}),
        ]

    def _forget_idempotency_keys(self, req: Request, _: re.Match[str]) -> Response:
        self.state.forget_idempotency_keys()
        return Response(204)

    def _list_emails(self, req: Request, _: re.Match[str]) -> Response:
        emails = self.state.emails(query_value(req.query, "to"))
        return json_response(200, [asdict(e) for e in emails])

    def _list_contacts(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.contacts(query_value(req.query, "email")))

    def _list_imports(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.processes())

    def _stats(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.stats())

    def _limits(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.limiter.snapshot())

    def _set_limits(self, req: Request, _: re.Match[str]) -> Response:
        """``{"tier"?, "limits"?: {FAMILY: "N/s" | "N/h" | "off" | null}}`` replaces the tier (general
        when left out) and every override; open windows close, totals stay."""
        payload = parse_json_object(req.body)
        unknown = sorted(set(payload) - LIMITS_KEYS)
        if unknown:
            raise invalid(f"unknown keys {', '.join(unknown)}: give tier and/or limits")
        limits = payload.get("limits")
        if limits is not None and not isinstance(limits, dict):
            raise invalid('limits must be an object such as {"contacts": "2/s", "email": "off"}')
        try:
            self.limiter.configure(payload.get("tier", DEFAULT_TIER), limits)
        except ValueError as exc:
            raise invalid(str(exc)) from None
        return json_response(200, self.limiter.snapshot())

    def _account(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.account())

    def _set_account(self, req: Request, _: re.Match[str]) -> Response:
        self.state.set_account(parse_account(parse_json_object(req.body)))
        return json_response(200, self.state.account())

    def _list_faults(self, req: Request, _: re.Match[str]) -> Response:
        return json_response(200, self.state.faults.listing())

    def _add_fault(self, req: Request, _: re.Match[str]) -> Response:
        fault_id = self.state.faults.add(parse_fault(parse_json_object(req.body)))
        return json_response(201, {"id": fault_id})

    def _clear_faults(self, req: Request, _: re.Match[str]) -> Response:
        self.state.faults.clear()
        return Response(204)

    def _reset(self, req: Request, _: re.Match[str]) -> Response:
        self.state.reset()
        self.limiter.reset()
        return Response(204)

    def _index_page(self, req: Request, _: re.Match[str]) -> Response:
        return html_response(200, render_index(self.state.emails(), self.limiter.snapshot()))

    def _email_page(self, req: Request, match: re.Match[str]) -> Response:
        email = self.state.email(int(match.group(1)))
        if email is None:
            return html_response(404, render_email_not_found())
        return html_response(200, render_email(email))
